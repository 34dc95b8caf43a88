// lathe snap create | ls | show | diff | restore | prune | gc | fsck | watch | rebuild-index
//
// Works directly on a store directory (--store DIR, or LATHE_SNAP_STORE).
// Without one, ls/show/diff/restore ask the daemon (which applies per-user
// access rules to the runs' snapshots) and the other verbs open the daemon's
// store directly when this user can. The logic lives in src/lathe/snap/;
// this file parses, calls and prints.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/common/log.h"
#include "lathe/common/units.h"
#include "lathe/daemon/home.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"
#include "lathe/os/terminal.h"
#include "lathe/run/event_text.h"
#include "lathe/snap/checkpoints.h"
#include "lathe/snap/diff.h"
#include "lathe/snap/info_json.h"
#include "lathe/snap/store.h"
#include "lathe/snap/watcher.h"

namespace lathe::cmd {
namespace {

using snap::Store;

struct SnapFlags {
  std::string store;
  std::string dir, ref, ref2, to;
  std::vector<std::string> tags;
  std::string parent = "auto";
  std::string reserve, keep_every, quiet;
  size_t keep_last = 0;
  bool json = false, force = false, dry_run = false;
};

std::string Short(const std::string& id) { return id.substr(0, 12); }

// Without --store: the store of the daemon a client would talk to, when this
// user can open it (the user's own daemon; root for the system one). A store
// that is there but not this user's to read (the system daemon's, for an
// ordinary user) is said as such, not as a missing one.
Result<std::string> DaemonStoreDir() {
  std::string dir = daemon::ReadableStoreDir();
  if (!dir.empty()) return dir;
  std::string closed = daemon::UnreadableStoreDir();
  if (!closed.empty()) {
    return Status::Msg(Code::kPermissionDenied, "snap.store_unreadable", {{"path", closed}});
  }
  return Status::Msg(Code::kNotFound, "snap.no_daemon_store");
}

Result<std::unique_ptr<Store>> OpenStore(const SnapFlags& f, bool create) {
  std::string dir = f.store;
  if (dir.empty()) {
    ASSIGN_OR_RETURN(dir, DaemonStoreDir());
  }
  snap::StoreOptions o;
  if (!f.reserve.empty()) {
    ASSIGN_OR_RETURN(uint64_t r, ParseBytes(f.reserve));
    o.reserve_bytes = r;
  }
  return create ? Store::Create(dir, o) : Store::Open(dir, o);
}

// ls, show, diff and restore go through the daemon when no --store is given
// and one answers: it applies the per-user access rules. Null: open directly.
Result<std::unique_ptr<api::ApiClient>> DaemonFor(const SnapFlags& f) {
  if (!f.store.empty()) return std::unique_ptr<api::ApiClient>();
  auto c = api::ApiClient::Connect();
  if (c.ok()) return std::move(*c);
  if (DaemonStoreDir().ok()) return std::unique_ptr<api::ApiClient>();
  return Status::Msg(Code::kUnavailable, "snap.no_daemon_store");
}

// A snapshot's id and manifest, from the daemon or the store.
Result<std::pair<snap::SnapshotId, snap::Manifest>> LoadSnapshot(const SnapFlags& f,
                                                                 const std::string& ref) {
  ASSIGN_OR_RETURN(auto client, DaemonFor(f));
  if (client) {
    ASSIGN_OR_RETURN(Json j, client->Get("/api/v1/snapshots/" + ref));
    ASSIGN_OR_RETURN(auto m, snap::ManifestFromJson(j["manifest"].dump()));
    return std::make_pair(j.value("id", ""), std::move(m));
  }
  ASSIGN_OR_RETURN(auto store, OpenStore(f, false));
  ASSIGN_OR_RETURN(auto id, store->Resolve(ref));
  ASSIGN_OR_RETURN(auto m, store->Load(id));
  return std::make_pair(id, std::move(m));
}

// Says on stderr that the store found its index damaged and rebuilt it.
void NoteRepair(const Store& store, Lang lang) {
  auto r = store.index_repair();
  if (r)
    std::fprintf(
        stderr, "%s\n",
        Tr("snap.index_rebuilt", lang, {{"moved_to", r->moved_to}, {"detail", r->detail}}).c_str());
}

// A one-line progress bar on stderr, only when stderr is a terminal.
snap::ProgressFn ProgressBar(std::string label) {
  if (!os::StderrIsTerminal()) return {};
  return [label](const snap::Progress& p) {
    constexpr int kWidth = 30;
    double frac = p.total_bytes
                      ? static_cast<double>(p.done_bytes) / static_cast<double>(p.total_bytes)
                      : 1.0;
    int fill = static_cast<int>(frac * kWidth);
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %s/%s ", label.c_str(), std::string(fill, '#').c_str(),
                 std::string(kWidth - fill, '-').c_str(), static_cast<int>(frac * 100),
                 FormatBytes(p.done_bytes).c_str(), FormatBytes(p.total_bytes).c_str());
    if (p.done_bytes >= p.total_bytes) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  };
}

Result<std::map<std::string, std::string>> ParseTags(const std::vector<std::string>& kvs) {
  std::map<std::string, std::string> tags;
  for (const auto& kv : kvs) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::Msg(Code::kInvalidArgument, "snap.bad_tag", {{"value", kv}});
    tags[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return tags;
}

std::string TagsText(const std::map<std::string, std::string>& tags) {
  std::string s;
  for (const auto& [k, v] : tags) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s.empty() ? "-" : s;
}

Status RunCreate(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto tags, ParseTags(f.tags));
  ASSIGN_OR_RETURN(auto store, OpenStore(f, true));
  snap::SnapshotOptions o;
  o.tags = std::move(tags);
  o.parent = f.parent == "none" ? "" : f.parent;
  o.progress = ProgressBar(Tr("snap.progress_capture", lang));
  auto snapped = store->Snapshot(f.dir, o);
  NoteRepair(*store, lang);
  ASSIGN_OR_RETURN(auto r, std::move(snapped));
  const auto& s = r.manifest.stats;
  if (f.json) {
    PrintJson({{"id", r.id},
               {"complete", r.manifest.complete()},
               {"files", s.files},
               {"bytes", s.bytes},
               {"files_read", s.files_read},
               {"new_chunks", s.new_chunks},
               {"new_bytes", s.new_bytes}});
    return Status::OK();
  }
  std::printf("%s\n", r.id.c_str());
  std::fprintf(stderr, "%s\n",
               Tr("snap.created", lang,
                  {{"id", Short(r.id)},
                   {"files", std::to_string(s.files)},
                   {"bytes", FormatBytes(s.bytes)},
                   {"read", std::to_string(s.files_read)},
                   {"new_bytes", FormatBytes(s.new_bytes)}})
                   .c_str());
  for (const auto& c : r.manifest.checkpoints) {
    if (!c.complete)
      std::fprintf(
          stderr, "%s\n",
          Tr("snap.incomplete_note", lang, {{"reason", c.path + " (" + c.reason + ")"}}).c_str());
  }
  return Status::OK();
}

// Rows of `snap ls` (info_json.h), from the daemon or the store.
Result<std::vector<Json>> LsRows(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto client, DaemonFor(f));
  std::vector<Json> rows;
  if (client) {
    ASSIGN_OR_RETURN(Json j,
                     client->Get("/api/v1/snapshots" + (f.ref.empty() ? "" : "?run=" + f.ref)));
    for (auto& r : j) rows.push_back(std::move(r));
    return rows;
  }
  ASSIGN_OR_RETURN(auto store, OpenStore(f, false));
  auto listed = store->List();
  NoteRepair(*store, lang);
  ASSIGN_OR_RETURN(auto snaps, std::move(listed));
  ASSIGN_OR_RETURN(auto skipped, store->Skipped());
  auto of_run = [&](const std::map<std::string, std::string>& tags) {
    return f.ref.empty() || (tags.count("run") && tags.at("run") == f.ref);
  };
  for (const auto& s : snaps) {
    if (of_run(s.tags)) rows.push_back(snap::InfoToJson(s));
  }
  for (const auto& s : skipped) {
    if (of_run(s.tags)) rows.push_back(snap::SkipToJson(s));
  }
  return rows;
}

std::string StatusWord(const std::string& status, Lang lang) {
  if (status == "skipped") return Tr("snap.status_skipped", lang);
  if (status == "incomplete") return Tr("snap.status_incomplete", lang);
  return Tr("snap.status_complete", lang);
}

Status RunLs(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto rows, LsRows(f, lang));
  for (auto& r : rows) {
    if (r.value("status", "") != "skipped") continue;
    std::string id = r.value("msg_id", "");
    r["reason_text"] = id.empty() ? r.value("reason", "") : Tr(id, lang, snap::SkipArgs(r));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Json& a, const Json& b) { return a["time_ms"] > b["time_ms"]; });
  if (f.json) {
    PrintJson(rows);
    return Status::OK();
  }
  if (rows.empty()) {
    std::printf("%s\n", Tr("snap.none", lang,
                           {{"path", f.store.empty() ? Tr("snap.the_daemon", lang) : f.store}})
                            .c_str());
    return Status::OK();
  }
  std::vector<std::vector<std::string>> table(1);
  for (const char* col : {"id", "age", "source", "tags", "files", "size", "new", "status"}) {
    table[0].push_back(Tr(std::string("snap.col.") + col, lang));
  }
  for (const auto& r : rows) {
    std::string status = r["status"].get<std::string>();
    std::string text = StatusWord(status, lang);
    if (status == "skipped" || status == "incomplete") {
      std::string reason = status == "skipped" ? r.value("reason_text", "")
                                               : run::ReasonText(r.value("reason", ""), lang);
      text = Tr("snap.status_reason", lang, {{"status", text}, {"reason", reason}});
    }
    bool skip = status == "skipped";
    table.push_back({skip ? "-" : Short(r["id"].get<std::string>()),
                     Age(r["time_ms"].get<int64_t>(), lang), r.value("source", ""),
                     TagsText(r["tags"].get<std::map<std::string, std::string>>()),
                     skip ? "-" : std::to_string(r["files"].get<uint64_t>()),
                     skip ? "-" : FormatBytes(r["bytes"].get<uint64_t>()),
                     skip ? "-" : FormatBytes(r["new_bytes"].get<uint64_t>()), text});
  }
  PrintTable(table);
  return Status::OK();
}

Status RunShow(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto loaded, LoadSnapshot(f, f.ref));
  auto& [id, m] = loaded;
  if (f.json) {
    Json j = Json::parse(snap::ManifestToJson(m));
    j["id"] = id;
    PrintJson(j);
    return Status::OK();
  }
  constexpr size_t kWidth = 10;  // "resume:   "
  auto field = [&](const char* id, const std::string& value) {
    std::printf("%s%s\n", Label(Tr(id, lang), kWidth).c_str(), value.c_str());
  };
  auto status_word = [&](bool complete) {
    return Tr(complete ? "snap.status_complete" : "snap.status_incomplete", lang);
  };
  field("snap.show.id", id);
  field("snap.show.time", AgeAgo(m.time_ms, lang));
  field("snap.show.source", m.source);
  field("snap.show.parent", m.parent.empty() ? "-" : Short(m.parent));
  field("snap.show.tags", TagsText(m.tags));
  field("snap.show.status", status_word(m.complete()));
  field("snap.show.files", Tr("snap.show.files_value", lang,
                              {{"files", std::to_string(m.stats.files)},
                               {"bytes", FormatBytes(m.stats.bytes)},
                               {"read", std::to_string(m.stats.files_read)},
                               {"new_bytes", FormatBytes(m.stats.new_bytes)}}));
  auto resume = snap::ChooseResume(m);
  field("snap.show.resume", resume ? resume->path : "-");
  std::printf("%s\n", Tr("snap.show.checkpoints", lang).c_str());
  for (const auto& c : m.checkpoints) {
    std::printf("  %s%s%s\n", Label(c.path + (c.is_dir ? "/" : ""), 41).c_str(),
                status_word(c.complete).c_str(),
                c.complete ? "" : (": " + run::ReasonText(c.reason, lang)).c_str());
  }
  std::vector<std::vector<std::string>> table(1);
  for (const char* col : {"path", "type", "size", "chunks", "check"}) {
    table[0].push_back(Tr(std::string("snap.col.") + col, lang));
  }
  for (const auto& e : m.files) {
    bool file = e.type == snap::EntryType::kFile;
    std::string check = file ? Tr("snap.verdict." + std::string(snap::VerdictName(e.check)), lang) +
                                   (e.format.empty() ? "" : " (" + e.format + ")")
                             : "";
    table.push_back({e.path + (e.type == snap::EntryType::kSymlink ? " -> " + e.target : ""),
                     Tr("snap.entry." + std::string(snap::EntryTypeName(e.type)), lang),
                     file ? FormatBytes(e.size) : "", file ? std::to_string(e.chunks.size()) : "",
                     check});
  }
  PrintTable(table);
  return Status::OK();
}

Status RunDiff(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto a, LoadSnapshot(f, f.ref));
  ASSIGN_OR_RETURN(auto b, LoadSnapshot(f, f.ref2));
  auto diff = snap::DiffManifests(a.second, b.second);
  static constexpr const char* kKind[] = {"added", "removed", "modified"};
  if (f.json) {
    Json out = Json::array();
    for (const auto& d : diff)
      out.push_back({{"kind", kKind[static_cast<int>(d.kind)]},
                     {"path", d.path},
                     {"new_bytes", d.new_bytes}});
    PrintJson(out);
    return Status::OK();
  }
  uint64_t count[3] = {0, 0, 0}, bytes = 0;
  for (const auto& d : diff) {
    static constexpr char kMark[] = {'+', '-', 'M'};
    int k = static_cast<int>(d.kind);
    ++count[k];
    bytes += d.new_bytes;
    std::printf("%c %s%s\n", kMark[k], d.path.c_str(),
                d.new_bytes ? (" (" + FormatBytes(d.new_bytes) + ")").c_str() : "");
  }
  std::printf("%s\n", Tr("snap.diff_summary", lang,
                         {{"added", std::to_string(count[0])},
                          {"removed", std::to_string(count[1])},
                          {"modified", std::to_string(count[2])},
                          {"bytes", FormatBytes(bytes)}})
                          .c_str());
  return Status::OK();
}

// On a terminal the restore streams its progress (server-sent events) into
// the same bar a local restore draws; otherwise one plain request.
Result<Json> RestoreThroughDaemon(api::ApiClient& client, const std::string& ref,
                                  const std::string& to, bool force, const snap::ProgressFn& bar) {
  std::string path = "/api/v1/snapshots/" + ref + "/restore";
  Json body = {{"to", to}, {"force", force}};
  if (!bar) return client.Post(path, body);
  return client.PostForResult(
      path + "?progress=1", body, [&](const std::string& event, const Json& data) {
        if (event != "progress") return;
        bar({data.value("done_bytes", uint64_t{0}), data.value("total_bytes", uint64_t{0})});
      });
}

Status RunRestore(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto client, DaemonFor(f));
  if (client) {
    std::string to = std::filesystem::absolute(f.to).lexically_normal().string();
    ASSIGN_OR_RETURN(Json r, RestoreThroughDaemon(*client, f.ref, to, f.force,
                                                  ProgressBar(Tr("snap.progress_restore", lang))));
    std::printf("%s\n", Tr("snap.restored", lang,
                           {{"id", Short(r.value("id", ""))},
                            {"path", to},
                            {"files", std::to_string(r.value("files", 0))},
                            {"bytes", FormatBytes(r.value("bytes", uint64_t{0}))}})
                            .c_str());
    return Status::OK();
  }
  ASSIGN_OR_RETURN(auto store, OpenStore(f, false));
  ASSIGN_OR_RETURN(auto id, store->Resolve(f.ref));
  snap::RestoreOptions o;
  o.force = f.force;
  o.progress = ProgressBar(Tr("snap.progress_restore", lang));
  auto restored = store->Restore(id, f.to, o);
  NoteRepair(*store, lang);
  ASSIGN_OR_RETURN(auto r, std::move(restored));
  for (const auto& d : r.damaged_pack_headers) {
    std::fprintf(stderr, "%s\n", Tr("snap.restore_header_damaged", lang, {{"detail", d}}).c_str());
  }
  std::printf("%s\n", Tr("snap.restored", lang,
                         {{"id", Short(id)},
                          {"path", f.to},
                          {"files", std::to_string(r.files)},
                          {"bytes", FormatBytes(r.bytes)}})
                          .c_str());
  return Status::OK();
}

Status RunPrune(const SnapFlags& f, Lang lang) {
  snap::PrunePolicy p;
  p.keep_last = f.keep_last;
  p.dry_run = f.dry_run;
  if (!f.keep_every.empty()) {
    ASSIGN_OR_RETURN(auto d, ParseDuration(f.keep_every));
    p.keep_every_ms = d.count();
  }
  ASSIGN_OR_RETURN(auto store, OpenStore(f, false));
  auto pruned = store->Prune(p);
  NoteRepair(*store, lang);
  ASSIGN_OR_RETURN(auto r, std::move(pruned));
  for (const auto& id : r.removed)
    std::printf("%s %s\n", f.dry_run ? "would remove" : "removed", Short(id).c_str());
  for (const auto& id : r.pinned) {
    auto holders = store->Pins(id);
    std::string names;
    for (const auto& h : holders.ok() ? *holders : std::vector<std::string>())
      names += (names.empty() ? "" : ", ") + h;
    std::printf("%s\n",
                Tr("snap.prune_pinned", lang, {{"id", Short(id)}, {"holders", names}}).c_str());
  }
  std::printf("%s\n", Tr(f.dry_run ? "snap.prune_dry" : "snap.pruned", lang,
                         {{"removed", std::to_string(r.removed.size())},
                          {"kept", std::to_string(r.kept.size())}})
                          .c_str());
  return Status::OK();
}

Status RunGc(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto store, OpenStore(f, false));
  auto collected = store->Gc();
  NoteRepair(*store, lang);
  ASSIGN_OR_RETURN(auto r, std::move(collected));
  std::printf("%s\n", Tr("snap.gc_done", lang,
                         {{"live", std::to_string(r.live_chunks)},
                          {"deleted", std::to_string(r.packs_deleted)},
                          {"rewritten", std::to_string(r.packs_rewritten)},
                          {"temp", std::to_string(r.temp_files_removed)},
                          {"freed", FormatBytes(r.bytes_freed)}})
                          .c_str());
  return Status::OK();
}

std::string ProblemText(const snap::FsckProblem& p, const snap::FsckReport& r, Lang lang) {
  bool lost = std::find(r.lost_snapshots.begin(), r.lost_snapshots.end(), p.snapshot) !=
              r.lost_snapshots.end();
  if (lost && p.file.empty()) {
    return Tr("snap.fsck_lost", lang,
              {{"snapshot", Short(p.snapshot)}, {"path", "snapshots/" + p.snapshot + ".json.zst"}});
  }
  if (!p.file.empty()) {
    return Tr(
        "snap.fsck_file", lang,
        {{"snapshot", Short(p.snapshot)}, {"file", p.file}, {"chunk", p.chunk}, {"what", p.what}});
  }
  if (!p.chunk.empty())
    return Tr("snap.fsck_chunk", lang, {{"pack", p.pack}, {"chunk", p.chunk}, {"what", p.what}});
  std::string where = !p.snapshot.empty() ? "snapshot " + Short(p.snapshot) : "pack " + p.pack;
  return Tr("snap.fsck_other", lang, {{"where", where}, {"what", p.what}});
}

Status RunFsck(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto store, OpenStore(f, false));
  auto checked = store->Fsck();
  if (!f.json) NoteRepair(*store, lang);
  ASSIGN_OR_RETURN(auto r, std::move(checked));
  if (f.json) {
    Json probs = Json::array();
    for (const auto& p : r.problems) {
      probs.push_back({{"snapshot", p.snapshot},
                       {"file", p.file},
                       {"chunk", p.chunk},
                       {"pack", p.pack},
                       {"what", p.what}});
    }
    Json repair = nullptr;
    if (r.index_repair)
      repair = {{"moved_to", r.index_repair->moved_to}, {"detail", r.index_repair->detail}};
    PrintJson({{"ok", r.ok()},
               {"packs", r.packs},
               {"chunks", r.chunks},
               {"snapshots", r.snapshots},
               {"unreferenced_packs", r.unreferenced_packs},
               {"temp_packs", r.temp_packs},
               {"lost_snapshots", r.lost_snapshots},
               {"index_rebuilt", repair},
               {"problems", probs}});
  } else {
    for (const auto& p : r.problems) std::printf("%s\n", ProblemText(p, r, lang).c_str());
    if (!r.lost_snapshots.empty()) {
      // Their chunks are among the "unreferenced" ones: gc must not be advised.
      std::printf("%s\n", Tr("snap.fsck_lost_advice", lang,
                             {{"count", std::to_string(r.lost_snapshots.size())}})
                              .c_str());
    } else if (r.unreferenced_packs || r.temp_packs) {
      std::printf("%s\n", Tr("snap.fsck_leftovers", lang,
                             {{"unreferenced", std::to_string(r.unreferenced_packs)},
                              {"temp", std::to_string(r.temp_packs)}})
                              .c_str());
    }
    if (r.ok()) {
      std::printf("%s\n", Tr("snap.fsck_ok", lang,
                             {{"snapshots", std::to_string(r.snapshots)},
                              {"packs", std::to_string(r.packs)},
                              {"chunks", std::to_string(r.chunks)}})
                              .c_str());
    }
  }
  if (r.ok()) return Status::OK();
  return Status::Msg(Code::kFailedPrecondition, "snap.fsck_failed",
                     {{"count", std::to_string(r.problems.size())}});
}

// Snapshots DIR after every settled burst of writes, until killed: what the
// daemon does for a run's checkpoint directory, by hand. One JSON line per
// snapshot (or skip) on stdout.
Status RunWatch(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto tags, ParseTags(f.tags));
  ASSIGN_OR_RETURN(auto store, OpenStore(f, true));
  snap::WatcherOptions wo;
  if (!f.quiet.empty()) {
    ASSIGN_OR_RETURN(auto q, ParseDuration(f.quiet));
    wo.quiet_ms = q.count();
  }
  snap::SnapshotOptions so;
  so.tags = tags;
  auto on_batch = [&](const snap::WatchBatch& b) {
    int64_t start = os::RealClock().MonotonicMs();
    auto r = store->Snapshot(f.dir, so);
    Json line = {{"time_ms", os::RealClock().NowMs()},
                 {"paths", b.paths},
                 {"mode", snap::WatchModeName(b.mode)},
                 {"snapshot_ms", os::RealClock().MonotonicMs() - start}};
    if (r.ok()) {
      line["id"] = r->id;
      line["complete"] = r->manifest.complete();
      line["new_bytes"] = r->manifest.stats.new_bytes;
      line["capture_ms"] = r->capture_ms;
      line["commit_ms"] = r->commit_ms;
    } else {
      line["error"] = Localize(r.status(), lang);
    }
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  };
  ASSIGN_OR_RETURN(auto w, snap::Watcher::Start(f.dir, wo, on_batch));
  if (w->mode() == snap::WatchMode::kPolling)
    std::fprintf(stderr, "%s\n",
                 Tr("snap.watch_polling", lang, {{"reason", w->fallback_reason()}}).c_str());
  while (true)
    ::pause();  // until a signal ends the process; a killed snapshot leaves the store consistent
}

Status RunRebuildIndex(const SnapFlags& f, Lang lang) {
  ASSIGN_OR_RETURN(auto store, OpenStore(f, false));
  Status st = store->RebuildIndex();
  NoteRepair(*store, lang);
  return st;
}

// --store on `snap` and on each verb, so both orders work.
void AddStore(CLI::App* app, SnapFlags& f) {
  app->add_option("--store", f.store)->envname("LATHE_SNAP_STORE");
}

}  // namespace

void SetupSnap(CLI::App& app, Globals& g, Status& status) {
  static SnapFlags f;
  auto* snap = app.add_subcommand("snap");
  snap->require_subcommand(1);
  AddStore(snap, f);
  auto bind = [&](CLI::App* sub, Status (*fn)(const SnapFlags&, Lang)) {
    AddStore(sub, f);
    sub->callback([&status, &g, fn] {
      // The library's log lines go to stderr, errors only (LATHE_LOG=warn for
      // more): what a person needs to know, these commands say themselves,
      // and stdout stays for the output (--json).
      InitLogging("error");
      status = fn(f, g.Language());
    });
  };

  auto* create = snap->add_subcommand("create");
  create->add_option("dir", f.dir)->required();
  create->add_option("--tag", f.tags);
  create->add_option("--parent", f.parent);
  create->add_option("--reserve", f.reserve);
  create->add_flag("--json", f.json);
  bind(create, RunCreate);

  auto* ls = snap->add_subcommand("ls");
  ls->add_option("run", f.ref);
  ls->add_flag("--json", f.json);
  bind(ls, RunLs);

  auto* show = snap->add_subcommand("show");
  show->add_option("snapshot", f.ref)->required();
  show->add_flag("--json", f.json);
  bind(show, RunShow);

  auto* diff = snap->add_subcommand("diff");
  diff->add_option("a", f.ref)->required();
  diff->add_option("b", f.ref2)->required();
  diff->add_flag("--json", f.json);
  bind(diff, RunDiff);

  auto* restore = snap->add_subcommand("restore");
  restore->add_option("snapshot", f.ref)->required();
  restore->add_option("--to", f.to)->required();
  restore->add_flag("--force", f.force);
  bind(restore, RunRestore);

  auto* prune = snap->add_subcommand("prune");
  prune->add_option("--keep-last", f.keep_last);
  prune->add_option("--keep-every", f.keep_every);
  prune->add_flag("--dry-run", f.dry_run);
  bind(prune, RunPrune);

  auto* gc = snap->add_subcommand("gc");
  bind(gc, RunGc);

  auto* fsck = snap->add_subcommand("fsck");
  fsck->add_flag("--json", f.json);
  bind(fsck, RunFsck);

  auto* watch = snap->add_subcommand("watch");
  watch->add_option("dir", f.dir)->required();
  watch->add_option("--tag", f.tags);
  watch->add_option("--quiet", f.quiet);
  watch->add_option("--reserve", f.reserve);
  bind(watch, RunWatch);

  auto* rebuild = snap->add_subcommand("rebuild-index");
  bind(rebuild, RunRebuildIndex);
}

}  // namespace lathe::cmd
