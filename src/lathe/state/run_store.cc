#include "lathe/state/run_store.h"

#include <fmt/format.h>

#include "lathe/state/schema.h"

namespace lathe::state {
namespace {

constexpr const char* kColumns =
    "id, name, seq, uid, user, kind, spec, state, gpus, attempt, retries_used, preemptions, "
    "created_at, started_at, finished_at, exit_code, signal, oom_killed, reason, stop_intent, "
    "run_dir, backend, handle, workspace, chain_started_at";

Result<RunRecord> RowToRecord(const Stmt& s) {
  RunRecord r;
  r.id = s.Text(0);
  r.name = s.Text(1);
  r.seq = s.Int(2);
  r.uid = static_cast<uid_t>(s.Int(3));
  r.user = s.Text(4);
  r.kind = run::RunKindFromName(s.Text(5)).value_or(run::RunKind::kJob);
  ASSIGN_OR_RETURN(Json spec, ParseJson(s.Text(6)));
  ASSIGN_OR_RETURN(r.spec, run::SpecFromJson(spec));
  auto st = run::StateFromName(s.Text(7));
  if (!st) return Status::Internal("unknown state '" + s.Text(7) + "' for run " + r.id);
  r.state = *st;
  ASSIGN_OR_RETURN(Json gpus, ParseJson(s.Text(8)));
  r.gpus = gpus.get<std::vector<int>>();
  r.attempt = static_cast<int>(s.Int(9));
  r.retries_used = static_cast<int>(s.Int(10));
  r.preemptions = static_cast<int>(s.Int(11));
  r.created_at_ms = s.Int(12);
  r.started_at_ms = s.Int(13);
  r.finished_at_ms = s.Int(14);
  if (auto v = s.OptInt(15)) r.exit_code = static_cast<int>(*v);
  if (auto v = s.OptInt(16)) r.signal = static_cast<int>(*v);
  r.oom_killed = s.Int(17) != 0;
  r.reason = s.Text(18);
  r.stop_intent = run::StopIntentFromName(s.Text(19));
  r.run_dir = s.Text(20);
  r.backend = s.Text(21);
  ASSIGN_OR_RETURN(r.handle, ParseJson(s.Text(22)));
  ASSIGN_OR_RETURN(r.workspace, ParseJson(s.Text(23)));
  r.chain_started_at_ms = s.Int(24);
  return r;
}

}  // namespace

namespace {
// What anyone may see of a run: who, state, GPUs, times.
Json CommonRunJson(const RunRecord& r) {
  return Json{{"id", r.id},
              {"name", r.name},
              {"seq", r.seq},
              {"uid", r.uid},
              {"user", r.user},
              {"kind", std::string(run::RunKindName(r.kind))},
              {"state", std::string(run::StateName(r.state))},
              {"priority", std::string(run::PriorityName(r.spec.priority))},
              {"gpus", r.gpus},
              {"attempt", r.attempt},
              {"restarts", r.attempt > 0 ? r.attempt - 1 : 0},
              {"preemptions", r.preemptions},
              {"created_at_ms", r.created_at_ms},
              {"started_at_ms", r.started_at_ms},
              {"chain_started_at_ms", r.chain_started_at_ms},
              {"finished_at_ms", r.finished_at_ms}};
}
}  // namespace

Json RunToJson(const RunRecord& r) {
  Json j = CommonRunJson(r);
  j["spec"] = run::SpecToJson(r.spec);
  j["retries_used"] = r.retries_used;
  j["oom_killed"] = r.oom_killed;
  j["reason"] = r.reason;
  j["run_dir"] = r.run_dir;
  j["exit_code"] = r.exit_code ? Json(*r.exit_code) : Json(nullptr);
  j["signal"] = r.signal ? Json(*r.signal) : Json(nullptr);
  if (r.workspace.is_object() && !r.workspace.empty()) j["workspace"] = r.workspace;
  // Who asked it to stop: "user", "preempt", "timeout" or "idle" (a notebook's idle stop).
  if (r.stop_intent != run::StopIntent::kNone) {
    j["stop_intent"] = std::string(run::StopIntentName(r.stop_intent));
  }
  return j;
}

Json RunToPublicJson(const RunRecord& r) {
  Json j = CommonRunJson(r);
  j["resources"] = {{"gpus", r.spec.gpus}, {"cpus", r.spec.cpus}, {"memory", r.spec.memory_bytes}};
  j["redacted"] = true;
  return j;
}

Json EventToJson(const EventRecord& e) {
  return Json{{"id", e.id},     {"run_id", e.run_id},   {"ts_ms", e.ts_ms},
              {"type", e.type}, {"message", e.message}, {"data", e.data}};
}

Result<std::unique_ptr<RunStore>> RunStore::Open(const std::string& db_path) {
  ASSIGN_OR_RETURN(std::unique_ptr<Db> db, OpenLatheDb(db_path));
  std::unique_ptr<RunStore> store(new RunStore(std::move(db)));
  ASSIGN_OR_RETURN(auto queued, store->InStates({run::RunState::kQueued}));
  for (const RunRecord& r : queued) store->NoteWritten(r);
  return store;
}

void RunStore::NoteWritten(const RunRecord& r) {
  if (r.state != run::RunState::kQueued) return NoteDeleted(r.id);
  queued_seq_[r.id] = r.seq;  // a run's seq never changes
  queued_[r.seq] = r;
}

void RunStore::NoteDeleted(const std::string& id) {
  auto it = queued_seq_.find(id);
  if (it == queued_seq_.end()) return;
  queued_.erase(it->second);
  queued_seq_.erase(it);
}

std::vector<const RunRecord*> RunStore::Queued() const {
  std::vector<const RunRecord*> out;
  out.reserve(queued_.size());
  for (const auto& [seq, r] : queued_) out.push_back(&r);
  return out;
}

Status RunStore::Insert(RunRecord& r, int64_t now_ms, const std::optional<IdempotencyKey>& key) {
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt q, db_->Prepare("SELECT COALESCE(MAX(seq), 0) + 1 FROM runs"));
    ASSIGN_OR_RETURN(bool row, q.Step());
    r.seq = row ? q.Int(0) : 1;
    r.created_at_ms = now_ms;
    ASSIGN_OR_RETURN(Stmt s, db_->Prepare(fmt::format(
                                 "INSERT INTO runs ({}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,"
                                 "?,?,?,?,?,?,?,?)",
                                 kColumns)));
    s.Bind(1, r.id).Bind(2, r.name).Bind(3, r.seq).Bind(4, int64_t{r.uid}).Bind(5, r.user);
    s.Bind(6, std::string(run::RunKindName(r.kind)))
        .Bind(7, run::SpecToJson(r.spec).dump())
        .Bind(8, run::StateName(r.state));
    s.Bind(9, Json(r.gpus).dump()).Bind(10, int64_t{r.attempt}).Bind(11, int64_t{r.retries_used});
    s.Bind(12, int64_t{r.preemptions}).Bind(13, r.created_at_ms).Bind(14, r.started_at_ms);
    s.Bind(15, r.finished_at_ms);
    s.Bind(16, r.exit_code ? std::optional<int64_t>(*r.exit_code) : std::nullopt);
    s.Bind(17, r.signal ? std::optional<int64_t>(*r.signal) : std::nullopt);
    s.Bind(18, int64_t{r.oom_killed})
        .Bind(19, r.reason)
        .Bind(20, std::string(run::StopIntentName(r.stop_intent)));
    s.Bind(21, r.run_dir).Bind(22, r.backend).Bind(23, r.handle.dump());
    s.Bind(24, r.workspace.dump()).Bind(25, r.chain_started_at_ms);
    RETURN_IF_ERROR(s.Run());
    if (key) RETURN_IF_ERROR(InsertKey(*key, r.id, now_ms));  // after the run: it references it
    return InsertEvent(r.id, "state", "submitted", Json{{"to", "queued"}}, now_ms);
  }));
  NoteWritten(r);
  return Status::OK();
}

// An expired row of the same uid and key gives way; a live one makes the
// insert fail (the primary key), and with it the whole submission.
Status RunStore::InsertKey(const IdempotencyKey& k, const std::string& run_id, int64_t now_ms) {
  ASSIGN_OR_RETURN(
      Stmt del,
      db_->Prepare("DELETE FROM idempotency_keys WHERE uid=? AND key=? AND created_at<=?"));
  del.Bind(1, int64_t{k.uid}).Bind(2, k.key).Bind(3, now_ms - kIdempotencyKeyTtlMs);
  RETURN_IF_ERROR(del.Run());
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare("INSERT INTO idempotency_keys (uid, key, request_hash, run_id, "
                                "created_at) VALUES (?,?,?,?,?)"));
  s.Bind(1, int64_t{k.uid}).Bind(2, k.key).Bind(3, k.request_hash).Bind(4, run_id).Bind(5, now_ms);
  return s.Run();
}

Result<std::optional<RunRecord>> RunStore::FindByKey(const IdempotencyKey& k, int64_t now_ms) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT request_hash, run_id FROM idempotency_keys "
                                        "WHERE uid=? AND key=? AND created_at>?"));
  s.Bind(1, int64_t{k.uid}).Bind(2, k.key).Bind(3, now_ms - kIdempotencyKeyTtlMs);
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<RunRecord>();
  std::string hash = s.Text(0), run_id = s.Text(1);
  if (hash != k.request_hash) {
    return Status::Msg(Code::kInvalidArgument, "run.idempotency_key_reused",
                       {{"key", k.key}, {"run", run_id}});
  }
  ASSIGN_OR_RETURN(RunRecord r, Get(run_id));
  return std::optional<RunRecord>(std::move(r));
}

Status RunStore::Delete(const std::string& id) {
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    // events and idempotency_keys reference runs ON DELETE CASCADE.
    ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM runs WHERE id=?"));
    s.Bind(1, id);
    RETURN_IF_ERROR(s.Run());
    ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
    ASSIGN_OR_RETURN(bool row, c.Step());
    if (!row || c.Int(0) == 0) return Status::Msg(Code::kNotFound, "run.not_found", {{"run", id}});
    return Status::OK();
  }));
  NoteDeleted(id);
  return Status::OK();
}

Result<int64_t> RunStore::PurgeExpiredKeys(int64_t now_ms) {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("DELETE FROM idempotency_keys WHERE created_at<=?"));
  s.Bind(1, now_ms - kIdempotencyKeyTtlMs);
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  return row ? c.Int(0) : 0;
}

Status RunStore::WriteRow(const RunRecord& r, std::optional<run::RunState> expected) {
  std::string sql =
      "UPDATE runs SET name=?, state=?, gpus=?, attempt=?, retries_used=?, preemptions=?, "
      "started_at=?, finished_at=?, exit_code=?, signal=?, oom_killed=?, reason=?, stop_intent=?, "
      "backend=?, handle=?, workspace=?, chain_started_at=? WHERE id=?";
  if (expected) sql += " AND state=?";
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(sql));
  s.Bind(1, r.name).Bind(2, run::StateName(r.state)).Bind(3, Json(r.gpus).dump());
  s.Bind(4, int64_t{r.attempt}).Bind(5, int64_t{r.retries_used}).Bind(6, int64_t{r.preemptions});
  s.Bind(7, r.started_at_ms).Bind(8, r.finished_at_ms);
  s.Bind(9, r.exit_code ? std::optional<int64_t>(*r.exit_code) : std::nullopt);
  s.Bind(10, r.signal ? std::optional<int64_t>(*r.signal) : std::nullopt);
  s.Bind(11, int64_t{r.oom_killed})
      .Bind(12, r.reason)
      .Bind(13, std::string(run::StopIntentName(r.stop_intent)));
  s.Bind(14, r.backend).Bind(15, r.handle.dump()).Bind(16, r.workspace.dump());
  s.Bind(17, r.chain_started_at_ms).Bind(18, r.id);
  if (expected) s.Bind(19, run::StateName(*expected));
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  if (!row || c.Int(0) != 1) {
    return Status::FailedPrecondition("run " + r.id + " changed concurrently");
  }
  return Status::OK();
}

Status RunStore::Transition(RunRecord& r, run::RunState to, const std::string& message,
                            int64_t now_ms) {
  run::RunState from = r.state;
  if (!run::CanTransition(from, to)) {
    return Status::FailedPrecondition(fmt::format("run {}: {} -> {} is not allowed", r.id,
                                                  run::StateName(from), run::StateName(to)));
  }
  RunRecord next = r;
  next.state = to;
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    RETURN_IF_ERROR(WriteRow(next, from));
    RETURN_IF_ERROR(RecordGpuAttempt(next, from, now_ms));
    Json data = {{"from", std::string(run::StateName(from))},
                 {"to", std::string(run::StateName(to))}};
    return InsertEvent(r.id, "state", message, data, now_ms);
  }));
  r = std::move(next);
  NoteWritten(r);
  return Status::OK();
}

// An attempt that takes GPUs is recorded as it starts and closed as it
// leaves the active states; its end is the run's finished_at when that
// belongs to this attempt (an exit recorded while the daemon was down), else now.
Status RunStore::RecordGpuAttempt(const RunRecord& r, run::RunState from, int64_t now_ms) {
  if (r.state == run::RunState::kStarting && r.spec.gpus > 0) {
    ASSIGN_OR_RETURN(
        Stmt s,
        db_->Prepare("INSERT OR REPLACE INTO gpu_attempts (run_id, attempt, uid, user, "
                     "gpus, started_at, ended_at, project) VALUES (?, ?, ?, ?, ?, ?, 0, ?)"));
    s.Bind(1, r.id).Bind(2, int64_t{r.attempt}).Bind(3, int64_t{r.uid}).Bind(4, r.user);
    s.Bind(5, int64_t{r.spec.gpus}).Bind(6, r.started_at_ms).Bind(7, r.spec.project);
    return s.Run();
  }
  if (!run::IsActive(from) || run::IsActive(r.state)) return Status::OK();
  int64_t end =
      r.finished_at_ms >= r.started_at_ms && r.finished_at_ms > 0 ? r.finished_at_ms : now_ms;
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("UPDATE gpu_attempts SET ended_at=max(?, started_at) "
                                        "WHERE run_id=? AND attempt=? AND ended_at=0"));
  s.Bind(1, end).Bind(2, r.id).Bind(3, int64_t{r.attempt});
  return s.Run();
}

Result<std::vector<GpuAttempt>> RunStore::GpuAttemptsSince(int64_t since_ms) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare("SELECT run_id, attempt, uid, user, gpus, started_at, ended_at, "
                                "project FROM gpu_attempts WHERE ended_at=0 OR ended_at>=? "
                                "ORDER BY run_id, attempt"));
  s.Bind(1, since_ms);
  std::vector<GpuAttempt> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    GpuAttempt a;
    a.run_id = s.Text(0);
    a.attempt = static_cast<int>(s.Int(1));
    a.uid = static_cast<uid_t>(s.Int(2));
    a.user = s.Text(3);
    a.gpus = static_cast<int>(s.Int(4));
    a.started_at_ms = s.Int(5);
    a.ended_at_ms = s.Int(6);
    a.project = s.Text(7);
    out.push_back(std::move(a));
  }
  return out;
}

Result<int64_t> RunStore::PurgeGpuAttempts(int64_t ended_before_ms) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare("DELETE FROM gpu_attempts WHERE ended_at>0 AND ended_at<?"));
  s.Bind(1, ended_before_ms);
  RETURN_IF_ERROR(s.Run());
  ASSIGN_OR_RETURN(Stmt c, db_->Prepare("SELECT changes()"));
  ASSIGN_OR_RETURN(bool row, c.Step());
  return row ? c.Int(0) : 0;
}

Status RunStore::Save(const RunRecord& r, const std::string& event_type, const std::string& message,
                      int64_t now_ms) {
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    RETURN_IF_ERROR(WriteRow(r, r.state));
    return InsertEvent(r.id, event_type, message, Json::object(), now_ms);
  }));
  NoteWritten(r);
  return Status::OK();
}

Status RunStore::SaveSpec(const RunRecord& r, const std::string& event_type,
                          const std::string& message, int64_t now_ms) {
  RETURN_IF_ERROR(db_->Transaction([&]() -> Status {
    ASSIGN_OR_RETURN(Stmt s, db_->Prepare("UPDATE runs SET spec=? WHERE id=?"));
    s.Bind(1, run::SpecToJson(r.spec).dump()).Bind(2, r.id);
    RETURN_IF_ERROR(s.Run());
    return InsertEvent(r.id, event_type, message, Json::object(), now_ms);
  }));
  NoteWritten(r);
  return Status::OK();
}

Status RunStore::AddEvent(const std::string& run_id, const std::string& type,
                          const std::string& message, const Json& data, int64_t now_ms) {
  return InsertEvent(run_id, type, message, data, now_ms);
}

Status RunStore::InsertEvent(const std::string& run_id, const std::string& type,
                             const std::string& msg, const Json& data, int64_t now_ms) {
  ASSIGN_OR_RETURN(
      Stmt s,
      db_->Prepare("INSERT INTO events (run_id, ts, type, message, data) VALUES (?,?,?,?,?)"));
  s.Bind(1, run_id).Bind(2, now_ms).Bind(3, type).Bind(4, msg).Bind(5, data.dump());
  return s.Run();
}

Result<std::vector<RunRecord>> RunStore::Query(const std::string& where_sql,
                                               const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(Stmt s,
                   db_->Prepare(fmt::format("SELECT {} FROM runs {}", kColumns, where_sql)));
  for (size_t i = 0; i < args.size(); ++i) s.Bind(static_cast<int>(i + 1), args[i]);
  std::vector<RunRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    ASSIGN_OR_RETURN(RunRecord r, RowToRecord(s));
    out.push_back(std::move(r));
  }
  return out;
}

Result<RunRecord> RunStore::Get(const std::string& id) {
  ASSIGN_OR_RETURN(auto rows, Query("WHERE id=?", {id}));
  if (rows.empty()) return Status::Msg(Code::kNotFound, "run.not_found", {{"run", id}});
  return std::move(rows[0]);
}

Result<RunRecord> RunStore::Resolve(const std::string& ref, std::optional<uid_t> prefer) {
  const std::string uid = prefer ? std::to_string(*prefer) : std::string("-1");
  ASSIGN_OR_RETURN(auto rows, Query("WHERE id=? OR name=? ORDER BY (id=?) DESC, (uid=?) DESC, "
                                    "seq DESC LIMIT 1",
                                    {ref, ref, ref, uid}));
  if (rows.empty()) return Status::Msg(Code::kNotFound, "run.not_found", {{"run", ref}});
  return std::move(rows[0]);
}

namespace {
// Queued and active runs, and those that ended at or after `ended_since_ms` (0: none).
// ... at most the `ended_limit` newest of those (<= 0: all of them).
std::string NotAllWhere(int64_t ended_since_ms, int ended_limit) {
  constexpr const char* kActive = "state IN ('queued','starting','running','stopping')";
  std::string w = std::string("WHERE (") + kActive;
  if (ended_since_ms > 0 && ended_limit > 0) {
    w += fmt::format(
        " OR id IN (SELECT id FROM runs WHERE finished_at >= {} AND NOT {} ORDER BY seq DESC "
        "LIMIT {})",
        ended_since_ms, kActive, ended_limit);
  } else if (ended_since_ms > 0) {
    w += " OR finished_at >= " + std::to_string(ended_since_ms);
  }
  return w + ")";
}

// "state IN ('queued','running')": the names are the code's own, written
// into the SQL (Query binds only text, and these need no binding).
std::string StateIn(const std::vector<run::RunState>& states) {
  std::string in;
  for (auto st : states) in += (in.empty() ? "'" : ",'") + std::string(run::StateName(st)) + "'";
  return "state IN (" + in + ")";
}

// The WHERE clause of List/Count: List's own condition and the filter's,
// the filter's values bound as `args` (text).
std::string FilterWhere(bool all, int64_t ended_since_ms, int ended_limit, const RunFilter& f,
                        std::vector<std::string>& args) {
  std::vector<std::string> terms;
  if (!all) terms.push_back(NotAllWhere(ended_since_ms, ended_limit).substr(6));  // "WHERE "
  if (!f.states.empty()) {
    terms.push_back(StateIn(f.states));
  }
  if (!f.user.empty()) {
    terms.push_back("user = ?");
    args.push_back(f.user);
  }
  if (f.kind) terms.push_back(fmt::format("kind = '{}'", run::RunKindName(*f.kind)));
  if (!f.text.empty()) {
    // LIKE with its wildcards escaped: the text is matched as written.
    std::string lit;
    for (char c : f.text) {
      if (c == '%' || c == '_' || c == '\\') lit += '\\';
      lit += c;
    }
    terms.push_back("(id LIKE ? ESCAPE '\\' OR name LIKE ? ESCAPE '\\')");
    args.push_back(lit + "%");
    args.push_back("%" + lit + "%");
  }
  std::string w;
  for (const auto& t : terms) w += (w.empty() ? "WHERE " : " AND ") + t;
  return w;
}

// ORDER BY for a sort RunFilter allows (checked by the API); newest first
// among equals.
std::string OrderBy(std::string_view sort) {
  bool desc = !sort.empty() && sort[0] == '-';
  if (desc) sort.remove_prefix(1);
  std::string key = "seq";
  if (sort == "name") key = "name";
  if (sort == "state") key = "state";
  if (sort == "user") key = "user";
  if (sort == "priority") {
    key = "(CASE json_extract(spec, '$.priority') WHEN 'high' THEN 2 WHEN 'low' THEN 0 ELSE 1 END)";
  }
  std::string dir = desc ? " DESC" : "";
  if (key == "seq") return " ORDER BY seq" + dir;
  return " ORDER BY " + key + dir + ", seq DESC";
}
}  // namespace

Result<std::vector<RunRecord>> RunStore::List(bool all, int limit, int64_t ended_since_ms,
                                              int ended_limit, const RunFilter& filter) {
  std::vector<std::string> args;
  std::string where = FilterWhere(all, ended_since_ms, ended_limit, filter, args);
  return Query(where + OrderBy(filter.sort) +
                   fmt::format(" LIMIT {} OFFSET {}", limit, std::max<int64_t>(0, filter.offset)),
               args);
}

Result<int64_t> RunStore::Count(bool all, int64_t ended_since_ms, int ended_limit,
                                const RunFilter& filter) {
  std::vector<std::string> args;
  std::string sql =
      "SELECT COUNT(*) FROM runs " + FilterWhere(all, ended_since_ms, ended_limit, filter, args);
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(sql));
  for (size_t i = 0; i < args.size(); ++i) s.Bind(static_cast<int>(i + 1), args[i]);
  ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Int(0) : 0;
}

Result<std::vector<RunRecord>> RunStore::InStates(const std::vector<run::RunState>& states) {
  return Query("WHERE " + StateIn(states) + " ORDER BY seq", {});
}

namespace {
constexpr const char* kFinishedStates =
    "state IN ('succeeded','failed','stopped','preempted','lost')";
constexpr const char* kEndedAt =
    "(CASE WHEN finished_at != 0 THEN finished_at ELSE created_at END)";
}  // namespace

Result<std::vector<RunRecord>> RunStore::FinishedBefore(int64_t cutoff_ms, std::optional<uid_t> uid,
                                                        size_t limit) {
  // Numbers written into the SQL, not bound: Query binds text, and a text
  // operand compares greater than every integer in an expression without a
  // column's affinity.
  std::string where = fmt::format("WHERE {} AND {} <= {}", kFinishedStates, kEndedAt, cutoff_ms);
  if (uid) where += fmt::format(" AND uid = {}", *uid);
  where += fmt::format(" ORDER BY {}, id", kEndedAt);
  if (limit > 0) where += fmt::format(" LIMIT {}", limit);
  return Query(where, {});
}

Result<int64_t> RunStore::CountFinished(std::optional<uid_t> uid) {
  std::string sql = fmt::format("SELECT COUNT(*) FROM runs WHERE {}", kFinishedStates);
  if (uid) sql += fmt::format(" AND uid = {}", *uid);
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(sql));
  ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Int(0) : 0;
}

Result<std::map<run::RunState, int64_t>> RunStore::CountByState() {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT state, COUNT(*) FROM runs GROUP BY state"));
  std::map<run::RunState, int64_t> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    if (auto st = run::StateFromName(s.Text(0))) out[*st] += s.Int(1);
  }
  return out;
}

Result<std::vector<std::pair<std::string, uid_t>>> RunStore::Owners() {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT id, uid FROM runs"));
  std::vector<std::pair<std::string, uid_t>> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.emplace_back(s.Text(0), static_cast<uid_t>(s.Int(1)));
  }
  return out;
}

Result<std::vector<RunRecord>> RunStore::OfDeployment(const std::string& deployment,
                                                      int64_t ended_since_ms) {
  // The expression and the kind match the partial index runs_by_deployment.
  return Query(fmt::format("WHERE kind = 'service' AND json_extract(spec, '$.deployment.name') = ? "
                           "AND (state IN ('queued','starting','running','stopping') OR "
                           "finished_at >= {}) ORDER BY seq",
                           ended_since_ms),
               {deployment});
}

Result<bool> RunStore::NameInUse(const std::string& name, std::optional<uid_t> uid) {
  const char* active = "state IN ('queued','starting','running','stopping')";
  ASSIGN_OR_RETURN(auto rows,
                   uid ? Query(std::string("WHERE name=? AND uid=? AND ") + active + " LIMIT 1",
                               {name, std::to_string(*uid)})
                       : Query(std::string("WHERE name=? AND ") + active + " LIMIT 1", {name}));
  return !rows.empty();
}

Result<int64_t> RunStore::LatestEventId() {
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare("SELECT COALESCE(MAX(id), 0) FROM events"));
  ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.Int(0) : 0;
}

Result<std::vector<EventRecord>> RunStore::Events(const std::string& run_id, int64_t after_id,
                                                  int limit) {
  std::string sql = "SELECT id, run_id, ts, type, message, data FROM events WHERE id > ?";
  if (!run_id.empty()) sql += " AND run_id = ?";
  sql += " ORDER BY id LIMIT " + std::to_string(limit);
  ASSIGN_OR_RETURN(Stmt s, db_->Prepare(sql));
  s.Bind(1, after_id);
  if (!run_id.empty()) s.Bind(2, run_id);
  std::vector<EventRecord> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    EventRecord e;
    e.id = s.Int(0);
    e.run_id = s.Text(1);
    e.ts_ms = s.Int(2);
    e.type = s.Text(3);
    e.message = s.Text(4);
    auto d = ParseJson(s.Text(5));
    e.data = d.ok() ? *d : Json::object();
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace lathe::state
