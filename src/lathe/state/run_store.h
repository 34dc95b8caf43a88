// Durable records of runs and their events, in SQLite (see db.h).
//
// The daemon changes a run only through Transition()/Save(), each one
// transaction that also appends an event, so that every state change is
// committed before it is acted on and the event history is complete.
// Not thread-safe: the daemon serialises calls under its own mutex.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/run/spec.h"
#include "lathe/run/state.h"
#include "lathe/state/db.h"

namespace lathe::state {

struct RunRecord {
  std::string id;
  std::string name;
  int64_t seq = 0;  // submit order, assigned by Insert
  uid_t uid = 0;
  std::string user;
  run::RunKind kind = run::RunKind::kJob;
  run::RunSpec spec;
  run::RunState state = run::RunState::kQueued;
  std::vector<int> gpus;  // allocation while starting/running/stopping
  int attempt = 0;        // incremented at every start
  int retries_used = 0;
  int preemptions = 0;
  int64_t created_at_ms = 0;
  int64_t started_at_ms = 0;  // of the current/last attempt
  // When the first job of the chain this attempt continues began: a pool run
  // that reached its partition's time limit goes on in a new job, and its
  // max_duration counts from here. 0 when the attempt is no continuation.
  int64_t chain_started_at_ms = 0;
  int64_t finished_at_ms = 0;
  std::optional<int> exit_code;
  std::optional<int> signal;
  bool oom_killed = false;
  std::string reason;                                    // why it ended/failed/is lost, for people
  run::StopIntent stop_intent = run::StopIntent::kNone;  // why we are stopping it
  std::string run_dir;
  // Who executes its attempts (exec/backend.h) and that backend's durable
  // handle of the current one ({} until it is launched).
  std::string backend = "local";
  Json handle = Json::object();
  // The run's workspace as the daemon knows it ({} without one):
  // {source, ref, dir, readonly, in_place} from the spec, and once the
  // run's first process has made it, the commit it checked out (commit), or
  // why it could not be made (error: a GitFailureName, message: the
  // reason). daemon/workspaces.h fills it.
  Json workspace = Json::object();
};

struct EventRecord {
  int64_t id = 0;
  std::string run_id;
  int64_t ts_ms = 0;
  std::string type;     // "state", "info", "warning"
  std::string message;  // English, for logs and the API
  Json data;            // e.g. {"from": "queued", "to": "starting"}
};

// One attempt that held GPUs (quotas and fair share count these): from the
// run's start of that attempt to its leaving the active states. Kept when
// the run is removed.
struct GpuAttempt {
  std::string run_id;
  int attempt = 0;
  uid_t uid = 0;
  std::string user;
  int gpus = 0;
  int64_t started_at_ms = 0;
  int64_t ended_at_ms = 0;  // 0: still active
  // The project its run's spec named when the attempt started ("" for
  // none), kept in the ledger: it outlives the run's removal.
  std::string project;
};

// An idempotency key (the API's Idempotency-Key header): requests from one
// uid that carry the same key are one submission. Keys of different uids
// never meet; a key lives kIdempotencyKeyTtlMs from its run's submission.
struct IdempotencyKey {
  uid_t uid = 0;
  std::string key;           // as the client sent it (the API validates it)
  std::string request_hash;  // of the canonical spec: equal hashes, same request
};
inline constexpr int64_t kIdempotencyKeyTtlMs = 24LL * 3600 * 1000;

Json RunToJson(const RunRecord& r);
// What every local user may see of another user's run (`lathe ps`): who,
// state, GPUs, resources asked for, times — no spec, command, environment,
// paths, reason or exit status. "redacted": true marks it.
Json RunToPublicJson(const RunRecord& r);
Json EventToJson(const EventRecord& e);

// What GET /api/v1/runs may ask beyond all/recent: filters, an order and a
// page. Every filter is ANDed with the others and with List's own.
struct RunFilter {
  std::vector<run::RunState> states;  // any of them; empty: any state
  std::string user;                   // the user's name; "": anyone
  std::optional<run::RunKind> kind;   // nullopt: any kind
  std::string text;                   // an id prefix or a part of the name; "": any
  std::string sort = "-created";      // see kRunSorts; '-' first: descending
  int64_t offset = 0;                 // rows skipped before the page
};

// The orders RunFilter::sort takes (each also with '-' before it).
inline constexpr const char* kRunSorts[] = {"created", "name", "state", "user", "priority"};

class RunStore {
 public:
  static Result<std::unique_ptr<RunStore>> Open(const std::string& db_path);

  // Inserts a new run (state queued) and assigns r.seq. With `key`, records
  // it for r.id in the same transaction, so that a crash never leaves the run
  // without its key; AlreadyExists when k.uid holds that key, live, already.
  Status Insert(RunRecord& r, int64_t now_ms,
                const std::optional<IdempotencyKey>& key = std::nullopt);
  // The run submitted under k.uid's key k.key, or nullopt when that uid has
  // no live key of that name (never used, or older than the TTL at now_ms).
  // InvalidArgument (run.idempotency_key_reused) when the key was used for a
  // different request (another request_hash).
  Result<std::optional<RunRecord>> FindByKey(const IdempotencyKey& k, int64_t now_ms);
  // Deletes the keys that are no longer live at now_ms; returns how many.
  Result<int64_t> PurgeExpiredKeys(int64_t now_ms);
  Result<RunRecord> Get(const std::string& id);
  // `ref` is an id or a name; for a name, the most recent run with it —
  // of `prefer`'s runs first when that uid has one (names are unique per
  // user: two users may each have a run called "train").
  Result<RunRecord> Resolve(const std::string& ref, std::optional<uid_t> prefer = std::nullopt);
  // Most recent first. Without `all`, only queued and active runs.
  // Without `all`, also the runs that ended at or after `ended_since_ms` (0: none),
  // the `ended_limit` newest of them when it is > 0.
  // With `filter`, only the runs it matches, in its order, from its offset.
  Result<std::vector<RunRecord>> List(bool all, int limit = 1000, int64_t ended_since_ms = 0,
                                      int ended_limit = 0, const RunFilter& filter = {});
  // How many runs List(all, ∞, ended_since_ms, ended_limit, filter) would
  // return (the filter's offset aside).
  Result<int64_t> Count(bool all, int64_t ended_since_ms = 0, int ended_limit = 0,
                        const RunFilter& filter = {});
  Result<std::vector<RunRecord>> InStates(const std::vector<run::RunState>& states);
  // The queued runs in submission order (seq), as InStates({kQueued}) reads
  // them, but from memory: the store is their only writer, so it keeps them
  // as it writes (Insert, Transition, Save, Delete; read once at Open). A
  // scheduling pass reads them without SQLite or decoding a spec. The
  // pointers are valid until the next write to the store.
  std::vector<const RunRecord*> Queued() const;
  // Finished runs (of `uid`, or everyone's) that ended at or before
  // `cutoff_ms` (finished_at, or created_at for one that never started),
  // oldest first, at most `limit` (0: all) — selected in SQL, so that a
  // prune does not read every finished run's record.
  Result<std::vector<RunRecord>> FinishedBefore(int64_t cutoff_ms, std::optional<uid_t> uid,
                                                size_t limit);
  // The replicas (runs of kind service) of `deployment` that are queued or
  // active, or ended at or after `ended_since_ms`; oldest first.
  Result<std::vector<RunRecord>> OfDeployment(const std::string& deployment,
                                              int64_t ended_since_ms);
  // How many finished runs `uid` (or everyone) has.
  Result<int64_t> CountFinished(std::optional<uid_t> uid);
  // How many runs there are in each state (states without runs are absent).
  Result<std::map<run::RunState, int64_t>> CountByState();
  // Every run's id and owner, whatever its state (what the daemon's disk
  // accounting walks).
  Result<std::vector<std::pair<std::string, uid_t>>> Owners();
  // Whether a queued or active run has this name (of `uid`'s runs, when given).
  Result<bool> NameInUse(const std::string& name, std::optional<uid_t> uid = std::nullopt);

  // Moves `r` to `to` (must be allowed by run::CanTransition) and saves all
  // its fields, in one transaction with a "state" event. Fails with
  // FailedPrecondition if the stored state is no longer r.state.
  Status Transition(RunRecord& r, run::RunState to, const std::string& message, int64_t now_ms);
  // Saves fields without a state change (e.g. stop_intent), with an event.
  Status Save(const RunRecord& r, const std::string& event_type, const std::string& message,
              int64_t now_ms);
  // Saves r.spec (a queued run's image id, once its pull ended) with an event.
  Status SaveSpec(const RunRecord& r, const std::string& event_type, const std::string& message,
                  int64_t now_ms);
  // Removes run `id` with its events and idempotency keys (one transaction).
  // NotFound (run.not_found) when there is no such run. The caller decides
  // whether the run may go (the daemon: only a finished one).
  Status Delete(const std::string& id);
  // The attempts that held GPUs and are still active or ended at or after
  // `since_ms`. Transition records them: a move to starting (with gpus > 0)
  // opens one, a move out of the active states closes it.
  Result<std::vector<GpuAttempt>> GpuAttemptsSince(int64_t since_ms);
  // Forgets attempts that ended before `ended_before_ms`; returns how many.
  Result<int64_t> PurgeGpuAttempts(int64_t ended_before_ms);
  Status AddEvent(const std::string& run_id, const std::string& type, const std::string& message,
                  const Json& data, int64_t now_ms);
  // Events with id > after_id; for one run, or all runs when run_id is empty.
  Result<std::vector<EventRecord>> Events(const std::string& run_id, int64_t after_id, int limit);
  // The id of the newest event (0: none).
  Result<int64_t> LatestEventId();

  const Db& db() const { return *db_; }

 private:
  explicit RunStore(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  // After a committed write of `r`: kept while queued, forgotten otherwise.
  void NoteWritten(const RunRecord& r);
  void NoteDeleted(const std::string& id);
  Status WriteRow(const RunRecord& r, std::optional<run::RunState> expected);
  Status RecordGpuAttempt(const RunRecord& r, run::RunState from, int64_t now_ms);
  Status InsertKey(const IdempotencyKey& k, const std::string& run_id, int64_t now_ms);
  Status InsertEvent(const std::string& run_id, const std::string& type, const std::string& msg,
                     const Json& data, int64_t now_ms);
  Result<std::vector<RunRecord>> Query(const std::string& where_sql,
                                       const std::vector<std::string>& args);

  std::unique_ptr<Db> db_;
  std::map<int64_t, RunRecord> queued_;        // by seq: the queued runs (Queued())
  std::map<std::string, int64_t> queued_seq_;  // their ids
};

}  // namespace lathe::state
