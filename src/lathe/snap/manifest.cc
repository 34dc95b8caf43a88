#include "lathe/snap/manifest.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace lathe::snap {

using nlohmann::json;

std::string_view EntryTypeName(EntryType t) {
  switch (t) {
    case EntryType::kFile:
      return "file";
    case EntryType::kDir:
      return "dir";
    case EntryType::kSymlink:
      return "symlink";
  }
  return "file";
}

bool Manifest::complete() const {
  return std::all_of(checkpoints.begin(), checkpoints.end(),
                     [](const Checkpoint& c) { return c.complete; });
}

const FileEntry* Manifest::Find(std::string_view path) const {
  auto it = std::lower_bound(files.begin(), files.end(), path,
                             [](const FileEntry& e, std::string_view p) { return e.path < p; });
  return it != files.end() && it->path == path ? &*it : nullptr;
}

namespace {

json EntryJson(const FileEntry& e) {
  json j = {{"path", e.path},
            {"type", EntryTypeName(e.type)},
            {"mode", e.mode},
            {"mtime_ns", e.mtime_ns}};
  if (e.type == EntryType::kSymlink) j["target"] = e.target;
  if (e.type != EntryType::kFile) return j;
  j["size"] = e.size;
  j["inode"] = e.inode;
  j["check"] = VerdictName(e.check);
  if (!e.format.empty()) j["format"] = e.format;
  if (!e.reason.empty()) j["reason"] = e.reason;
  json chunks = json::array();
  for (const auto& c : e.chunks) chunks.push_back(json::array({ToHex(c.id), c.size}));
  j["chunks"] = std::move(chunks);
  return j;
}

json CheckpointJson(const Checkpoint& c) {
  json j = {
      {"path", c.path}, {"dir", c.is_dir}, {"complete", c.complete}, {"mtime_ns", c.mtime_ns}};
  if (c.step) j["step"] = *c.step;
  if (!c.reason.empty()) j["reason"] = c.reason;
  return j;
}

json StatsJson(const ManifestStats& s) {
  return {{"files", s.files},
          {"bytes", s.bytes},
          {"files_read", s.files_read},
          {"new_chunks", s.new_chunks},
          {"new_bytes", s.new_bytes}};
}

}  // namespace

std::string ManifestToJson(const Manifest& m) {
  json files = json::array(), cps = json::array();
  for (const auto& e : m.files) files.push_back(EntryJson(e));
  for (const auto& c : m.checkpoints) cps.push_back(CheckpointJson(c));
  json j = {{"format", kManifestFormat},
            {"time_ms", m.time_ms},
            {"source", m.source},
            {"parent", m.parent},
            {"tags", m.tags},
            {"files", std::move(files)},
            {"checkpoints", std::move(cps)},
            {"stats", StatsJson(m.stats)}};
  return j.dump();
}

namespace {

EntryType ParseType(const std::string& s) {
  if (s == "dir") return EntryType::kDir;
  if (s == "symlink") return EntryType::kSymlink;
  if (s == "file") return EntryType::kFile;
  throw std::invalid_argument("type");
}

FileEntry ParseEntry(const json& j) {
  FileEntry e;
  e.path = j.at("path").get<std::string>();
  e.type = ParseType(j.at("type").get<std::string>());
  e.mode = j.at("mode").get<uint32_t>();
  e.mtime_ns = j.at("mtime_ns").get<int64_t>();
  e.target = j.value("target", "");
  if (e.type != EntryType::kFile) return e;
  e.size = j.at("size").get<uint64_t>();
  e.inode = j.value("inode", uint64_t{0});
  e.check = VerdictFromName(j.value("check", "unchecked"));
  e.format = j.value("format", "");
  e.reason = j.value("reason", "");
  for (const auto& c : j.at("chunks")) {
    auto d = DigestFromHex(c.at(0).get<std::string>());
    if (!d) throw std::invalid_argument("chunk id");
    e.chunks.push_back({*d, c.at(1).get<uint32_t>()});
  }
  return e;
}

Checkpoint ParseCheckpoint(const json& j) {
  Checkpoint c;
  c.path = j.at("path").get<std::string>();
  c.is_dir = j.at("dir").get<bool>();
  c.complete = j.at("complete").get<bool>();
  c.mtime_ns = j.value("mtime_ns", int64_t{0});
  if (j.contains("step")) c.step = j.at("step").get<int64_t>();
  c.reason = j.value("reason", "");
  return c;
}

void ParseStats(const json& j, ManifestStats* s) {
  s->files = j.value("files", uint64_t{0});
  s->bytes = j.value("bytes", uint64_t{0});
  s->files_read = j.value("files_read", uint64_t{0});
  s->new_chunks = j.value("new_chunks", uint64_t{0});
  s->new_bytes = j.value("new_bytes", uint64_t{0});
}

}  // namespace

Result<Manifest> ManifestFromJson(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("manifest: not a JSON object");
  if (j.value("format", "") != kManifestFormat) {
    return Status::InvalidArgument("manifest: unknown format '" + j.value("format", "") + "'");
  }
  Manifest m;
  try {  // nlohmann reports a wrong type by throwing; it stops here
    m.time_ms = j.at("time_ms").get<int64_t>();
    m.source = j.at("source").get<std::string>();
    m.parent = j.value("parent", "");
    m.tags = j.value("tags", std::map<std::string, std::string>{});
    for (const auto& e : j.at("files")) m.files.push_back(ParseEntry(e));
    for (const auto& c : j.value("checkpoints", json::array()))
      m.checkpoints.push_back(ParseCheckpoint(c));
    ParseStats(j.value("stats", json::object()), &m.stats);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("manifest: bad field: ") + e.what());
  }
  return m;
}

SnapshotInfo Summarize(const SnapshotId& id, const Manifest& m) {
  SnapshotInfo i{id,
                 m.time_ms,
                 m.source,
                 m.parent,
                 m.tags,
                 m.stats.files,
                 m.stats.bytes,
                 m.stats.new_bytes,
                 m.complete(),
                 ""};
  for (const auto& c : m.checkpoints) {
    if (!c.complete) {
      i.reason = c.path + ": " + c.reason;
      break;
    }
  }
  return i;
}

SnapshotId ManifestId(std::string_view canonical_json) { return ToHex(Sha256(canonical_json)); }

}  // namespace lathe::snap
