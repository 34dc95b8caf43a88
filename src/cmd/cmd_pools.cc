// lathe pools [--json]
#include <chrono>
#include <cstdio>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/units.h"
#include "lathe/run/event_text.h"

namespace lathe::cmd {
namespace {

int Int(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_number_integer() ? j[key].get<int>() : 0;
}

// A partition's MaxTime as people write it: "no limit", "2d", "1h30m".
std::string MaxTime(const Json& p, Lang lang) {
  int64_t ms = p.value("max_time_ms", int64_t{-1});
  if (ms < 0) return Tr("pools.no_limit", lang);
  return FormatDuration(std::chrono::milliseconds(ms));
}

// "partition gpu, account lab": what the pool's config asks of the cluster.
std::string Settings(const Json& pool, Lang lang) {
  std::string out;
  for (const char* key : {"partition", "account", "qos"}) {
    std::string v = pool.value(key, "");
    if (v.empty()) continue;
    if (!out.empty()) out += ", ";
    out += Tr(std::string("pools.setting.") + key, lang, {{"value", v}});
  }
  return out.empty() ? "-" : out;
}

// "running: r-1, r-2; queued: r-3" ("" when the caller has none there).
std::string RunIds(const Json& runs, Lang lang) {
  std::string out;
  for (const char* state : {"running", "starting", "queued"}) {
    if (!runs.contains(state)) continue;
    const Json& ids = runs[state]["ids"];
    if (!ids.is_array() || ids.empty()) continue;
    std::string list;
    for (const Json& id : ids) list += (list.empty() ? "" : ", ") + id.get<std::string>();
    if (!out.empty()) out += "; ";
    out += run::StateLabel(state, lang) + ": " + list;
  }
  return out;
}

Status RunPools(bool json, Lang lang) {
  ASSIGN_OR_RETURN(auto c, api::ApiClient::Connect());
  ASSIGN_OR_RETURN(Json out, c->Get("/api/v1/pools"));
  if (json) {
    PrintJson(out);
    return Status::OK();
  }
  const Json pools = out.value("pools", Json::array());
  std::vector<std::vector<std::string>> rows(1);
  for (const char* col : {"pool", "type", "runs", "settings"}) {
    rows[0].push_back(Tr(std::string("pools.col.") + col, lang));
  }
  std::vector<std::vector<std::string>> parts(1);
  for (const char* col : {"pool", "partition", "state", "nodes", "gpus", "max_time"}) {
    parts[0].push_back(Tr(std::string("pools.col.") + col, lang));
  }
  std::vector<std::string> notes;
  for (const Json& p : pools) {
    const std::string name = p.value("name", "");
    const Json runs = p.value("runs", Json::object());
    auto count = [&](const char* state) {
      return runs.contains(state) ? std::to_string(Int(runs[state], "count")) : "0";
    };
    rows.push_back(
        {p.value("default", false) ? Tr("pools.default_mark", lang, {{"name", name}}) : name,
         p.value("type", ""), count("queued") + "/" + count("starting") + "/" + count("running"),
         Settings(p, lang)});
    for (const Json& part : p.value("partitions", Json::array())) {
      const Json nodes = part.value("nodes", Json::object());
      const Json gpus = part.value("gpus", Json::object());
      std::string gpu =
          std::to_string(Int(gpus, "used")) + "/" + std::to_string(Int(gpus, "total"));
      std::string types;
      for (const Json& t : gpus.value("types", Json::array())) {
        types += (types.empty() ? "" : ",") + t.get<std::string>();
      }
      if (!types.empty()) gpu += " (" + types + ")";
      parts.push_back(
          {name,
           part.value("default", false)
               ? Tr("pools.default_mark", lang, {{"name", part.value("name", "")}})
               : part.value("name", ""),
           part.value("state", ""),
           std::to_string(Int(nodes, "idle")) + "/" + std::to_string(Int(nodes, "allocated")) +
               "/" + std::to_string(Int(nodes, "down")) + "/" + std::to_string(Int(nodes, "total")),
           gpu, MaxTime(part, lang)});
    }
    if (p.contains("error") && p["error"].is_object()) {
      const Json& e = p["error"];
      notes.push_back(PickText(e.value("en", ""), e.value("zh", ""), lang));
    }
    if (std::string ids = RunIds(runs, lang); !ids.empty()) {
      notes.push_back(Tr("pools.your_runs", lang, {{"pool", name}, {"runs", ids}}));
    }
  }
  PrintTable(rows);
  if (parts.size() > 1) {
    std::printf("\n");
    PrintTable(parts);
  }
  if (!notes.empty()) std::printf("\n");
  for (const std::string& n : notes) std::printf("%s\n", n.c_str());
  return Status::OK();
}

}  // namespace

void SetupPools(CLI::App& app, Globals& g, Status& status) {
  static bool json = false;
  auto* sub = app.add_subcommand("pools");
  sub->add_flag("--json", json);
  sub->callback([&status, &g] { status = RunPools(json, g.Language()); });
}

}  // namespace lathe::cmd
