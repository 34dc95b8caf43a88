#include "lathe/snap/info_json.h"

namespace lathe::snap {

Json InfoToJson(const SnapshotInfo& i) {
  return {{"id", i.id},
          {"time_ms", i.time_ms},
          {"source", i.source},
          {"parent", i.parent},
          {"tags", i.tags},
          {"files", i.files},
          {"bytes", i.bytes},
          {"new_bytes", i.new_bytes},
          {"status", i.complete ? "complete" : "incomplete"},
          {"reason", i.reason}};
}

Json SkipToJson(const SkipRecord& s) {
  Json args = Json::object();
  for (const auto& a : s.args) args[a.key] = a.value;
  return {{"id", nullptr},       {"time_ms", s.time_ms}, {"source", s.source}, {"tags", s.tags},
          {"status", "skipped"}, {"reason", s.reason},   {"msg_id", s.msg_id}, {"args", args}};
}

MsgArgs SkipArgs(const Json& row) { return MsgArgsFromJson(row.value("args", Json())); }

}  // namespace lathe::snap
