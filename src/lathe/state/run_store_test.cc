#include "lathe/state/run_store.h"
#include "lathe/state/schema.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

namespace lathe::state {
namespace {

using run::RunState;

// A run's row as an older Lathe wrote it: `values` is "(id, name, seq, uid,
// user, spec, state, attempt, created_at, started_at, finished_at, run_dir)".
Status InsertOldRun(Db& db, const char* values) {
  return db.Exec(std::string("INSERT INTO runs (id, name, seq, uid, user, spec, state, attempt, "
                             "created_at, started_at, finished_at, run_dir) VALUES ") +
                 values);
}

class RunStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lathe-store-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    auto s = RunStore::Open(dir_ + "/lathe.db");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  RunRecord NewRun(const std::string& id, const std::string& name) {
    RunRecord r;
    r.id = id;
    r.name = name;
    r.user = "alice";
    r.uid = 1000;
    r.spec.command = {"python3", "train.py"};
    r.spec.gpus = 1;
    r.run_dir = dir_ + "/runs/" + id;
    return r;
  }

  std::string dir_;
  std::unique_ptr<RunStore> store_;
};

TEST_F(RunStoreTest, InsertAssignsSequenceAndRecordsSubmitEvent) {
  RunRecord a = NewRun("r1", "a"), b = NewRun("r2", "b");
  ASSERT_TRUE(store_->Insert(a, 1000).ok());
  ASSERT_TRUE(store_->Insert(b, 1001).ok());
  EXPECT_EQ(a.seq + 1, b.seq);
  auto got = store_->Get("r2");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->spec.command, b.spec.command);
  EXPECT_EQ(got->state, RunState::kQueued);
  auto ev = store_->Events("r1", 0, 10);
  ASSERT_TRUE(ev.ok());
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_EQ(ev->at(0).message, "submitted");
  EXPECT_TRUE(store_->db().wal());
}

// A pool run's chain start survives a save and a reopen (a daemon restart).
TEST_F(RunStoreTest, TheChainStartIsKept) {
  RunRecord r = NewRun("r1", "a");
  ASSERT_TRUE(store_->Insert(r, 1000).ok());
  r.chain_started_at_ms = 123456;
  ASSERT_TRUE(store_->Save(r, "info", "chained", 2000).ok());
  store_.reset();
  auto s = RunStore::Open(dir_ + "/lathe.db");
  ASSERT_TRUE(s.ok());
  auto got = (*s)->Get("r1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->chain_started_at_ms, 123456);
}

TEST_F(RunStoreTest, DeleteRemovesTheRunItsEventsAndItsKeys) {
  RunRecord a = NewRun("r1", "a"), b = NewRun("r2", "b");
  IdempotencyKey k{1000, "key-1", "hash-1"};
  ASSERT_TRUE(store_->Insert(a, 1000, k).ok());
  ASSERT_TRUE(store_->Insert(b, 1001).ok());
  ASSERT_TRUE(store_->AddEvent("r1", "info", "hello", Json::object(), 1002).ok());
  ASSERT_TRUE(store_->Delete("r1").ok());
  EXPECT_TRUE(store_->Get("r1").status().IsNotFound());
  auto events = store_->Events("", 0, 100);
  ASSERT_TRUE(events.ok());
  for (const auto& e : *events) EXPECT_EQ(e.run_id, "r2");
  auto key = store_->FindByKey(k, 1003);  // the key went with its run
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_FALSE(key->has_value());
  auto count = store_->Count(true);
  ASSERT_TRUE(count.ok());
  EXPECT_EQ(*count, 1);
  Status again = store_->Delete("r1");
  EXPECT_TRUE(again.IsNotFound());
  EXPECT_EQ(again.msg_id(), "run.not_found");
}

TEST_F(RunStoreTest, FinishedBeforeSelectsOldFinishedRunsOldestFirst) {
  auto finish = [&](const std::string& id, uid_t uid, RunState end, int64_t at) {
    RunRecord r = NewRun(id, id);
    r.uid = uid;
    ASSERT_TRUE(store_->Insert(r, 1).ok());
    ASSERT_TRUE(store_->Transition(r, RunState::kStarting, "placed", at - 2).ok());
    if (end == RunState::kStarting) return;  // left active
    ASSERT_TRUE(store_->Transition(r, RunState::kRunning, "started", at - 1).ok());
    r.finished_at_ms = at;
    ASSERT_TRUE(store_->Transition(r, end, "ended", at).ok());
  };
  finish("r1", 1000, RunState::kFailed, 100);
  finish("r2", 1000, RunState::kSucceeded, 50);
  finish("r3", 1001, RunState::kSucceeded, 200);
  finish("r4", 1000, RunState::kStarting, 10);
  auto ids = [](const Result<std::vector<RunRecord>>& rs) {
    std::vector<std::string> out;
    for (const auto& r : *rs) out.push_back(r.id);
    return out;
  };
  EXPECT_EQ(ids(store_->FinishedBefore(150, std::nullopt, 0)),
            (std::vector<std::string>{"r2", "r1"}));
  EXPECT_EQ(ids(store_->FinishedBefore(100, std::nullopt, 0)),
            (std::vector<std::string>{"r2", "r1"}));  // at the cutoff counts
  EXPECT_TRUE(store_->FinishedBefore(150, 1001, 0)->empty());
  EXPECT_EQ(ids(store_->FinishedBefore(1000, std::nullopt, 1)), std::vector<std::string>{"r2"});
  EXPECT_EQ(*store_->CountFinished(1000), 2);
  EXPECT_EQ(*store_->CountFinished(std::nullopt), 3);
}

TEST_F(RunStoreTest, CountByStateCountsEveryRunOnce) {
  EXPECT_TRUE(store_->CountByState()->empty());
  RunRecord a = NewRun("r1", "a"), b = NewRun("r2", "b"), c = NewRun("r3", "c");
  for (RunRecord* r : {&a, &b, &c}) ASSERT_TRUE(store_->Insert(*r, 1).ok());
  ASSERT_TRUE(store_->Transition(c, RunState::kStarting, "placed", 2).ok());
  auto counts = store_->CountByState();
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  EXPECT_EQ(*counts,
            (std::map<RunState, int64_t>{{RunState::kQueued, 2}, {RunState::kStarting, 1}}));
}

// The queued runs kept in memory are what the database holds as queued, after
// every kind of write, in submission order, and after a reopen.
TEST_F(RunStoreTest, QueuedFromMemoryMatchesTheDatabase) {
  auto same = [&](const char* when) {
    SCOPED_TRACE(when);
    auto db = store_->InStates({RunState::kQueued});
    ASSERT_TRUE(db.ok());
    std::vector<const RunRecord*> mem = store_->Queued();
    ASSERT_EQ(mem.size(), db->size());
    for (size_t i = 0; i < mem.size(); ++i) {
      EXPECT_EQ(mem[i]->id, (*db)[i].id);
      EXPECT_EQ(mem[i]->seq, (*db)[i].seq);
      EXPECT_EQ(mem[i]->retries_used, (*db)[i].retries_used);
      EXPECT_EQ(mem[i]->spec.gpus, (*db)[i].spec.gpus);
      EXPECT_EQ(mem[i]->reason, (*db)[i].reason);
    }
  };
  RunRecord a = NewRun("r1", "a"), b = NewRun("r2", "b"), c = NewRun("r3", "c");
  for (RunRecord* r : {&a, &b, &c}) ASSERT_TRUE(store_->Insert(*r, 1).ok());
  same("inserted");
  ASSERT_TRUE(store_->Transition(a, RunState::kStarting, "placed", 2).ok());
  same("one placed");
  b.reason = "noted";
  ASSERT_TRUE(store_->Save(b, "info", "saved", 3).ok());
  same("one saved while queued");
  ASSERT_TRUE(store_->Transition(a, RunState::kRunning, "started", 4).ok());
  ASSERT_TRUE(store_->Transition(a, RunState::kLost, "lost", 5).ok());
  a.retries_used = 1;
  ASSERT_TRUE(store_->Transition(a, RunState::kQueued, "retry", 6).ok());
  same("requeued");
  EXPECT_EQ(store_->Queued().front()->id, "r1");  // its place in the queue is its seq
  ASSERT_TRUE(store_->Transition(c, RunState::kStopped, "stopped", 7).ok());
  ASSERT_TRUE(store_->Delete("r3").ok());
  same("deleted");
  EXPECT_FALSE(store_->Transition(c, RunState::kRunning, "not allowed", 8).ok());
  same("a refused transition");
  // A failed insert (the id is taken) changes nothing.
  RunRecord dup = NewRun("r2", "dup");
  EXPECT_FALSE(store_->Insert(dup, 9).ok());
  same("a failed insert");
  auto reopened = RunStore::Open(dir_ + "/lathe.db");
  ASSERT_TRUE(reopened.ok());
  store_ = std::move(reopened).value();
  same("reopened");
  EXPECT_EQ(store_->Queued().size(), 2u);
}

TEST_F(RunStoreTest, OwnersListsEveryRunWhateverItsState) {
  RunRecord a = NewRun("r1", "a"), b = NewRun("r2", "b");
  b.uid = 1234;
  for (RunRecord* r : {&a, &b}) ASSERT_TRUE(store_->Insert(*r, 1).ok());
  ASSERT_TRUE(store_->Transition(a, RunState::kStarting, "placed", 2).ok());
  ASSERT_TRUE(store_->Transition(a, RunState::kFailed, "gone", 3).ok());
  auto owners = store_->Owners();
  ASSERT_TRUE(owners.ok()) << owners.status().ToString();
  std::map<std::string, uid_t> got(owners->begin(), owners->end());
  EXPECT_EQ(got, (std::map<std::string, uid_t>{{"r1", a.uid}, {"r2", 1234}}));
}

TEST_F(RunStoreTest, TransitionsAreCheckedAndRecorded) {
  RunRecord r = NewRun("r1", "job");
  ASSERT_TRUE(store_->Insert(r, 1).ok());
  EXPECT_FALSE(store_->Transition(r, RunState::kRunning, "skip", 2).ok());  // not allowed
  r.gpus = {2};
  ASSERT_TRUE(store_->Transition(r, RunState::kStarting, "placed", 2).ok());
  ASSERT_TRUE(store_->Transition(r, RunState::kRunning, "started", 3).ok());
  r.exit_code = 3;
  ASSERT_TRUE(store_->Transition(r, RunState::kFailed, "exit 3", 4).ok());
  auto got = store_->Get("r1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, RunState::kFailed);
  EXPECT_EQ(got->exit_code, 3);
  EXPECT_EQ(got->gpus, std::vector<int>{2});
  auto ev = store_->Events("r1", 0, 10);
  ASSERT_EQ(ev->size(), 4u);
  EXPECT_EQ(ev->at(3).data["from"], "running");
  EXPECT_EQ(ev->at(3).data["to"], "failed");
}

TEST_F(RunStoreTest, StaleRecordCannotOverwriteANewerState) {
  RunRecord r = NewRun("r1", "job");
  ASSERT_TRUE(store_->Insert(r, 1).ok());
  RunRecord stale = r;
  ASSERT_TRUE(store_->Transition(r, RunState::kStarting, "placed", 2).ok());
  Status st = store_->Transition(stale, RunState::kStopped, "cancel", 3);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->Get("r1")->state, RunState::kStarting);
}

TEST_F(RunStoreTest, ResolveByIdOrLatestNameAndListFilters) {
  RunRecord a = NewRun("r1", "train"), b = NewRun("r2", "train"), c = NewRun("r3", "other");
  ASSERT_TRUE(store_->Insert(a, 1).ok());
  ASSERT_TRUE(store_->Transition(a, RunState::kStopped, "cancel", 2).ok());
  ASSERT_TRUE(store_->Insert(b, 3).ok());
  ASSERT_TRUE(store_->Insert(c, 4).ok());
  EXPECT_EQ(store_->Resolve("train")->id, "r2");
  EXPECT_EQ(store_->Resolve("r1")->id, "r1");
  auto missing = store_->Resolve("nope");
  EXPECT_TRUE(missing.status().IsNotFound());
  EXPECT_EQ(missing.status().msg_id(), "run.not_found");
  EXPECT_EQ(store_->List(false)->size(), 2u);
  EXPECT_EQ(store_->List(true)->size(), 3u);
  EXPECT_TRUE(*store_->NameInUse("train"));
  EXPECT_FALSE(*store_->NameInUse("gone"));
}

TEST_F(RunStoreTest, NamesAreEachUsersOwn) {
  RunRecord mine = NewRun("r1", "train"), theirs = NewRun("r2", "train");
  mine.uid = 1001;
  theirs.uid = 1002;
  ASSERT_TRUE(store_->Insert(mine, 1).ok());
  ASSERT_TRUE(store_->Insert(theirs, 2).ok());
  EXPECT_TRUE(*store_->NameInUse("train", 1001));
  EXPECT_FALSE(*store_->NameInUse("train", 1003));
  EXPECT_EQ(store_->Resolve("train", 1001)->id, "r1");  // the caller's own, though older
  EXPECT_EQ(store_->Resolve("train", 1002)->id, "r2");
  EXPECT_EQ(store_->Resolve("train", 1003)->id, "r2");  // none of theirs: the newest
  EXPECT_EQ(store_->Resolve("r2", 1001)->id, "r2");     // an id is that run, whoever asks
}

TEST_F(RunStoreTest, FilterNarrowsOrdersAndPages) {
  RunRecord a = NewRun("r1", "b_x"), b = NewRun("r2", "abx"), c = NewRun("r3", "cab");
  b.user = "bob";
  c.spec.priority = run::Priority::kHigh;
  a.spec.priority = run::Priority::kLow;
  for (RunRecord* r : {&a, &b, &c}) ASSERT_TRUE(store_->Insert(*r, 1).ok());
  ASSERT_TRUE(store_->Transition(a, RunState::kStopped, "cancel", 2).ok());
  auto ids = [&](const RunFilter& f, int limit = 10) {
    std::string out;
    auto rows = store_->List(true, limit, 0, 0, f);
    if (!rows.ok()) return rows.status().ToString();
    for (const auto& r : *rows) out += r.id + " ";
    return out;
  };
  RunFilter f;
  EXPECT_EQ(ids(f), "r3 r2 r1 ");
  f.sort = "created";
  EXPECT_EQ(ids(f), "r1 r2 r3 ");
  f.sort = "name";
  EXPECT_EQ(ids(f), "r2 r1 r3 ");
  f.sort = "-priority";
  EXPECT_EQ(ids(f), "r3 r2 r1 ");
  f.sort = "priority";
  EXPECT_EQ(ids(f), "r1 r2 r3 ");
  f.offset = 1;
  EXPECT_EQ(ids(f, 1), "r2 ");
  f = RunFilter{};
  f.text = "_";  // a literal underscore, not LIKE's any-character
  EXPECT_EQ(ids(f), "r1 ");
  f.text = "r2";  // an id prefix
  EXPECT_EQ(ids(f), "r2 ");
  f = RunFilter{};
  f.user = "bob";
  EXPECT_EQ(ids(f), "r2 ");
  EXPECT_EQ(*store_->Count(true, 0, 0, f), 1);
  f = RunFilter{};
  f.states = {RunState::kStopped, RunState::kRunning};
  EXPECT_EQ(ids(f), "r1 ");
  f.states = {RunState::kQueued};
  EXPECT_EQ(*store_->Count(false, 0, 0, f), 2);
  f.kind = run::RunKind::kNotebook;
  EXPECT_EQ(*store_->Count(true, 0, 0, f), 0);
  EXPECT_EQ(*store_->LatestEventId(), 4);  // three submissions and a stop
}

TEST_F(RunStoreTest, SurvivesReopenAndKeepsSchemaVersion) {
  RunRecord a = NewRun("r1", "x");
  ASSERT_TRUE(store_->Insert(a, 1).ok());
  store_.reset();
  auto s = RunStore::Open(dir_ + "/lathe.db");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->db().schema_version(), static_cast<int>(SchemaMigrations().size()));
  EXPECT_TRUE((*s)->Get("r1").ok());
}

// A home written before runs had backends (schema v2): each run's monitor
// fields become its local handle; nothing else changes.
TEST_F(RunStoreTest, MigratesMonitorFieldsIntoTheLocalHandle) {
  store_.reset();
  const std::string path = dir_ + "/old.db";
  {
    const auto& all = SchemaMigrations();
    auto db = Db::Open(path, {all[0], all[1]});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO runs (id, name, seq, uid, user, spec, state, attempt, "
                           "created_at, monitor_pid, monitor_start, child_pid, run_dir, "
                           "cgroup_dirs) VALUES ('r-live', 'live', 1, 0, 'root', "
                           "'{\"command\":[\"sleep\",\"9\"]}', 'running', 1, 1, 4242, "
                           "987654321, 4243, '/h/runs/r-live', '[\"/sys/fs/cgroup/x/r-live-1\"]')")
                    .ok());
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO runs (id, name, seq, uid, user, spec, state, created_at, "
                           "run_dir) VALUES ('r-q', 'q', 2, 0, 'root', "
                           "'{\"command\":[\"true\"]}', 'queued', 2, '/h/runs/r-q')")
                    .ok());
  }
  auto s = RunStore::Open(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->db().schema_version(), static_cast<int>(SchemaMigrations().size()));
  auto live = (*s)->Get("r-live");
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_EQ(live->backend, "local");
  EXPECT_EQ(live->handle.value("monitor_pid", 0), 4242);
  EXPECT_EQ(live->handle.value("monitor_start", uint64_t{0}), 987654321u);
  EXPECT_EQ(live->handle.value("child_pid", 0), 4243);
  EXPECT_EQ(live->handle["cgroup_dirs"], Json::array({"/sys/fs/cgroup/x/r-live-1"}));
  EXPECT_EQ(live->state, run::RunState::kRunning);
  EXPECT_EQ(live->spec.command, (std::vector<std::string>{"sleep", "9"}));
  auto queued = (*s)->Get("r-q");
  ASSERT_TRUE(queued.ok());
  EXPECT_FALSE(queued->handle.contains("monitor_pid"));
  EXPECT_EQ(queued->handle["cgroup_dirs"], Json::array());
  // The migrated row is written back like any other.
  RunRecord r = *live;
  r.handle["monitor_pid"] = 7;
  ASSERT_TRUE((*s)->Save(r, "info", "x", 3).ok());
  EXPECT_EQ((*s)->Get("r-live")->handle.value("monitor_pid", 0), 7);
}

// ---- GPU attempts (quotas and fair share) ---------------------------------------

TEST_F(RunStoreTest, EachAttemptWithGpusIsRecordedAndOutlivesItsRun) {
  RunRecord r = NewRun("r1", "a");
  r.spec.gpus = 2;
  r.spec.project = "vision";
  ASSERT_TRUE(store_->Insert(r, 100).ok());
  r.attempt = 1;
  r.started_at_ms = 1000;
  ASSERT_TRUE(store_->Transition(r, RunState::kStarting, "placed", 1000).ok());
  ASSERT_TRUE(store_->Transition(r, RunState::kRunning, "started", 1001).ok());
  auto open = store_->GpuAttemptsSince(5000);
  ASSERT_TRUE(open.ok());
  ASSERT_EQ(open->size(), 1u);  // still active: whatever the window
  EXPECT_EQ(open->at(0).ended_at_ms, 0);
  EXPECT_EQ(open->at(0).gpus, 2);
  EXPECT_EQ(open->at(0).user, "alice");
  EXPECT_EQ(open->at(0).project, "vision");  // the run's spec.project
  // Preempted at the exit time the monitor recorded, then a second attempt.
  r.finished_at_ms = 4000;
  ASSERT_TRUE(store_->Transition(r, RunState::kStopping, "preempting", 3900).ok());
  ASSERT_TRUE(store_->Transition(r, RunState::kPreempted, "preempted", 4500).ok());
  ASSERT_TRUE(store_->Transition(r, RunState::kQueued, "requeued", 4500).ok());
  r.attempt = 2;
  r.started_at_ms = 6000;
  ASSERT_TRUE(store_->Transition(r, RunState::kStarting, "placed", 6000).ok());
  r.finished_at_ms = 0;  // ended without a recorded time: now
  ASSERT_TRUE(store_->Transition(r, RunState::kFailed, "failed", 7000).ok());
  auto all = store_->GpuAttemptsSince(0);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ(all->at(0).started_at_ms, 1000);
  EXPECT_EQ(all->at(0).ended_at_ms, 4000);
  EXPECT_EQ(all->at(1).attempt, 2);
  EXPECT_EQ(all->at(1).ended_at_ms, 7000);
  EXPECT_EQ(store_->GpuAttemptsSince(5000)->size(), 1u);  // the first ended before
  // Removing the run gives neither its user nor its project the GPU-hours
  // back, also once the store is opened again (a daemon restart).
  ASSERT_TRUE(store_->Delete("r1").ok());
  store_.reset();
  auto reopened = RunStore::Open(dir_ + "/lathe.db");
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  store_ = std::move(reopened).value();
  auto kept = store_->GpuAttemptsSince(0);
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ(kept->size(), 2u);
  EXPECT_EQ(kept->at(0).user, "alice");
  EXPECT_EQ(kept->at(0).project, "vision");
  EXPECT_EQ(kept->at(1).project, "vision");
  EXPECT_EQ(*store_->PurgeGpuAttempts(5000), 1);
  EXPECT_EQ(store_->GpuAttemptsSince(0)->size(), 1u);
}

TEST_F(RunStoreTest, RunsWithoutGpusRecordNoAttempt) {
  RunRecord r = NewRun("r1", "a");
  r.spec.gpus = 0;
  ASSERT_TRUE(store_->Insert(r, 100).ok());
  r.attempt = 1;
  ASSERT_TRUE(store_->Transition(r, RunState::kStarting, "placed", 1000).ok());
  EXPECT_TRUE(store_->GpuAttemptsSince(0)->empty());
}

// A home from before the ledger (v5): each run's latest attempt that held
// GPUs is counted from its start.
TEST_F(RunStoreTest, MigrationRecordsTheLatestAttemptOfEachRun) {
  store_.reset();
  const std::string path = dir_ + "/v5.db";
  {
    const auto& all = SchemaMigrations();
    auto db = Db::Open(path, {all.begin(), all.begin() + 5});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    for (const char* row :
         {"('r-done', 'd', 1, 1000, 'alice', '{\"command\":[\"x\"],\"gpus\":2}', "
          "'succeeded', 1, 1, 100, 400, '/h')",
          "('r-live', 'l', 2, 1000, 'alice', '{\"command\":[\"x\"],\"gpus\":1}', "
          "'running', 3, 1, 500, 0, '/h')",
          "('r-cpu', 'c', 3, 1000, 'alice', '{\"command\":[\"x\"]}', 'succeeded', 1, 1, "
          "100, 400, '/h')",
          "('r-q', 'q', 4, 1000, 'alice', '{\"command\":[\"x\"],\"gpus\":1}', 'queued', "
          "0, 1, 0, 0, '/h')"}) {
      ASSERT_TRUE(InsertOldRun(**db, row).ok());
    }
  }
  auto s = RunStore::Open(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto got = (*s)->GpuAttemptsSince(0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ(got->at(0).run_id, "r-done");
  EXPECT_EQ(got->at(0).gpus, 2);
  EXPECT_EQ(got->at(0).ended_at_ms, 400);
  EXPECT_EQ(got->at(1).run_id, "r-live");
  EXPECT_EQ(got->at(1).attempt, 3);
  EXPECT_EQ(got->at(1).ended_at_ms, 0);
}

// A home of schema v15 (the ledger without projects): each attempt takes
// its run's project from the run's row; a run removed before has none.
TEST_F(RunStoreTest, MigrationGivesEachAttemptItsRunsProject) {
  store_.reset();
  const std::string path = dir_ + "/v15.db";
  {
    const auto& all = SchemaMigrations();
    ASSERT_GE(all.size(), 16u);
    auto db = Db::Open(path, {all.begin(), all.begin() + 15});
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_EQ((*db)->schema_version(), 15);
    for (const char* row : {"('r-ml', 'a', 1, 1000, 'alice', '{\"command\":[\"x\"],\"gpus\":1,"
                            "\"project\":\"ml\"}', 'succeeded', 1, 1, 100, 400, '/h')",
                            "('r-none', 'b', 2, 1000, 'alice', '{\"command\":[\"x\"],\"gpus\":1}', "
                            "'succeeded', 1, 1, 100, 400, '/h')"}) {
      ASSERT_TRUE(InsertOldRun(**db, row).ok());
    }
    for (const char* id : {"r-ml", "r-none", "r-gone"}) {
      ASSERT_TRUE((*db)
                      ->Exec(std::string("INSERT INTO gpu_attempts (run_id, attempt, uid, user, "
                                         "gpus, started_at, ended_at) VALUES ('") +
                             id + "', 1, 1000, 'alice', 1, 100, 400)")
                      .ok());
    }
  }
  auto s = RunStore::Open(path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->db().schema_version(), static_cast<int>(SchemaMigrations().size()));
  auto got = (*s)->GpuAttemptsSince(0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ(got->at(0).run_id, "r-gone");
  EXPECT_EQ(got->at(0).project, "");  // removed before: nothing to read it from
  EXPECT_EQ(got->at(1).run_id, "r-ml");
  EXPECT_EQ(got->at(1).project, "ml");
  EXPECT_EQ(got->at(2).run_id, "r-none");
  EXPECT_EQ(got->at(2).project, "");
}

// ---- idempotency keys ------------------------------------------------------------
// Times are passed in explicitly: the store's clock is the caller's.

constexpr int64_t kT0 = 1'700'000'000'000;

TEST_F(RunStoreTest, TheSameKeyAndRequestFindTheSameRun) {
  RunRecord a = NewRun("r1", "a");
  IdempotencyKey k{1000, "key-1", "hash-a"};
  ASSERT_TRUE(store_->FindByKey(k, kT0).ok());
  EXPECT_FALSE(store_->FindByKey(k, kT0)->has_value());
  ASSERT_TRUE(store_->Insert(a, kT0, k).ok());
  auto found = store_->FindByKey(k, kT0 + 5000);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, "r1");
  EXPECT_EQ((*found)->spec.command, a.spec.command);
}

TEST_F(RunStoreTest, TheSameKeyWithAnotherRequestIsRefused) {
  RunRecord a = NewRun("r1", "a");
  ASSERT_TRUE(store_->Insert(a, kT0, IdempotencyKey{1000, "key-1", "hash-a"}).ok());
  auto other = store_->FindByKey({1000, "key-1", "hash-b"}, kT0 + 1);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(other.status().msg_id(), "run.idempotency_key_reused");
  EXPECT_NE(other.status().message().find("key-1"), std::string::npos);
}

TEST_F(RunStoreTest, KeysAreScopedToTheirUid) {
  RunRecord a = NewRun("r1", "a"), b = NewRun("r2", "b");
  b.uid = 1001;
  ASSERT_TRUE(store_->Insert(a, kT0, IdempotencyKey{1000, "shared", "hash-a"}).ok());
  // Another user's key of the same name is not theirs to see, whatever the body.
  EXPECT_FALSE(store_->FindByKey({1001, "shared", "hash-a"}, kT0)->has_value());
  EXPECT_FALSE(store_->FindByKey({1001, "shared", "hash-b"}, kT0)->has_value());
  ASSERT_TRUE(store_->Insert(b, kT0, IdempotencyKey{1001, "shared", "hash-b"}).ok());
  EXPECT_EQ((*store_->FindByKey({1000, "shared", "hash-a"}, kT0))->id, "r1");
  EXPECT_EQ((*store_->FindByKey({1001, "shared", "hash-b"}, kT0))->id, "r2");
}

// The key goes in with the run or not at all: a submission whose key cannot
// be recorded leaves no run behind.
TEST_F(RunStoreTest, AKeyAndItsRunAreOneTransaction) {
  RunRecord a = NewRun("r1", "a"), b = NewRun("r2", "b");
  ASSERT_TRUE(store_->Insert(a, kT0, IdempotencyKey{1000, "k", "hash-a"}).ok());
  Status st = store_->Insert(b, kT0 + 1, IdempotencyKey{1000, "k", "hash-a"});
  EXPECT_EQ(st.code(), Code::kAlreadyExists) << st.ToString();
  EXPECT_TRUE(store_->Get("r2").status().IsNotFound());
  EXPECT_EQ(store_->List(true)->size(), 1u);
}

TEST_F(RunStoreTest, KeysExpireAfterTheirTtl) {
  RunRecord a = NewRun("r1", "a"), b = NewRun("r2", "b"), c = NewRun("r3", "c");
  IdempotencyKey k{1000, "k", "hash-a"};
  ASSERT_TRUE(store_->Insert(a, kT0, k).ok());
  ASSERT_TRUE(store_->Insert(c, kT0 + 1000, IdempotencyKey{1000, "later", "hash-c"}).ok());
  const int64_t last_live = kT0 + kIdempotencyKeyTtlMs - 1;
  EXPECT_EQ((*store_->FindByKey(k, last_live))->id, "r1");
  EXPECT_FALSE(store_->FindByKey(k, last_live + 1)->has_value());
  // Nothing to purge while live; then exactly the expired one.
  EXPECT_EQ(*store_->PurgeExpiredKeys(last_live), 0);
  EXPECT_EQ(*store_->PurgeExpiredKeys(last_live + 1), 1);
  EXPECT_EQ((*store_->FindByKey({1000, "later", "hash-c"}, last_live + 1))->id, "r3");
  // An expired key is free again, even before a purge has removed it.
  const int64_t later_expires = kT0 + 1000 + kIdempotencyKeyTtlMs;
  IdempotencyKey again{1000, "later", "hash-b"};
  EXPECT_EQ(store_->Insert(b, later_expires - 1, again).code(), Code::kAlreadyExists);
  ASSERT_TRUE(store_->Insert(b, later_expires, again).ok());
  EXPECT_EQ((*store_->FindByKey(again, later_expires))->id, "r2");
  // The runs themselves stay.
  EXPECT_TRUE(store_->Get("r1").ok());
  EXPECT_TRUE(store_->Get("r3").ok());
}

TEST(Db, NetworkFileSystemsAreKnownByTheirMagic) {
  EXPECT_EQ(NetworkFsName(0x6969), "nfs");
  EXPECT_EQ(NetworkFsName(0xFF534D42), "cifs");
  EXPECT_EQ(NetworkFsName(0xFE534D42), "smb2");
  EXPECT_EQ(NetworkFsName(0xEF53), "");      // ext4
  EXPECT_EQ(NetworkFsName(0x01021994), "");  // tmpfs
}

// On NFS the database uses the rollback journal, says so, and still works
// (and is a valid database afterwards on a local disk, in WAL mode again).
TEST(Db, OnNfsUsesTheRollbackJournalAndSaysSo) {
  char tmpl[] = "/tmp/lathe-db-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  {
    auto db = Db::Open(dir + "/x.db", {"CREATE TABLE a(x)"}, /*fs_type=*/0x6969);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_FALSE((*db)->wal());
    EXPECT_NE((*db)->journal_note().find("nfs"), std::string::npos);
    auto mode = (*db)->Prepare("PRAGMA journal_mode");
    ASSERT_TRUE(mode.ok());
    auto row = mode->Step();
    ASSERT_TRUE(row.ok() && *row);
    EXPECT_EQ(mode->Text(0), "delete");
    EXPECT_TRUE((*db)->Exec("INSERT INTO a VALUES (1)").ok());
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.db-wal"));
  auto local = Db::Open(dir + "/x.db", {"CREATE TABLE a(x)"});
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE((*local)->wal());
  EXPECT_TRUE((*local)->journal_note().empty());
  std::filesystem::remove_all(dir);
}

TEST(Db, RefusesANewerSchema) {
  char tmpl[] = "/tmp/lathe-db-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  {
    auto db = Db::Open(dir + "/x.db", {"CREATE TABLE a(x)", "CREATE TABLE b(x)"});
    ASSERT_TRUE(db.ok());
    EXPECT_EQ((*db)->schema_version(), 2);
  }
  auto older = Db::Open(dir + "/x.db", {"CREATE TABLE a(x)"});
  ASSERT_FALSE(older.ok());
  EXPECT_NE(older.status().message().find("newer"), std::string::npos);
  // A failing migration leaves the version where it was.
  auto bad = Db::Open(dir + "/y.db", {"CREATE TABLE a(x)", "THIS IS NOT SQL"});
  ASSERT_FALSE(bad.ok());
  auto again = Db::Open(dir + "/y.db", {"CREATE TABLE a(x)"});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->schema_version(), 1);
  std::filesystem::remove_all(dir);
}

// A kept statement is reset and bound again; a reset SELECT no longer holds
// its read snapshot, so it sees rows committed after its first step.
TEST(Db, ResetStatementsAreReused) {
  char tmpl[] = "/tmp/lathe-db-XXXXXX";
  std::string dir = ::mkdtemp(tmpl);
  auto db = Db::Open(dir + "/x.db", {"CREATE TABLE a(x INTEGER)"});
  ASSERT_TRUE(db.ok());
  auto ins = (*db)->Prepare("INSERT INTO a VALUES (?)");
  auto count = (*db)->Prepare("SELECT count(*), sum(x) FROM a");
  ASSERT_TRUE(ins.ok() && count.ok());
  for (int64_t v : {1, 2, 40}) {
    ins->Reset();
    ASSERT_TRUE(ins->Bind(1, v).Run().ok());
    count->Reset();
    auto row = count->Step();
    ASSERT_TRUE(row.ok() && *row);
    EXPECT_EQ(count->Int(1), v == 1 ? 1 : v == 2 ? 3 : 43);
  }
  count->Reset();
  ins->Reset();
  ASSERT_TRUE(ins->Run().ok());  // bindings cleared: NULL
  auto row = count->Step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(count->Int(0), 4);
  EXPECT_EQ(count->Int(1), 43);
  std::filesystem::remove_all(dir);
}

// v9: the workspace column. A home an older Lathe left at v8 gains it
// (empty for its runs); a run's workspace is saved and read back, and shown
// in its JSON only when it has one.
TEST_F(RunStoreTest, WorkspaceIsSavedAndAVersion8HomeGainsIt) {
  const std::string path = dir_ + "/old.db";
  {
    const auto& all = SchemaMigrations();
    ASSERT_GE(all.size(), 9u);
    auto db = Db::Open(path, std::vector<std::string>(all.begin(), all.begin() + 8));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO runs (id, name, seq, uid, user, spec, state, created_at, "
                           "run_dir) VALUES ('r-q', 'q', 1, 0, 'root', "
                           "'{\"command\":[\"true\"]}', 'queued', 2, '/h/runs/r-q')")
                    .ok());
  }
  auto old = RunStore::Open(path);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  auto q = (*old)->Get("r-q");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(q->workspace.empty());
  EXPECT_FALSE(RunToJson(*q).contains("workspace"));

  RunRecord r = NewRun("r1", "a");
  r.spec.workspace.git = "https://h/r.git";
  ASSERT_TRUE(store_->Insert(r, 1000).ok());
  r.workspace = Json{{"source", "https://h/r.git"}, {"commit", std::string(40, 'a')}};
  ASSERT_TRUE(store_->Save(r, "info", "workspace", 1001).ok());
  auto got = store_->Get("r1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->workspace.value("commit", ""), std::string(40, 'a'));
  EXPECT_EQ(got->spec.workspace.git, "https://h/r.git");
  EXPECT_EQ(RunToJson(*got)["workspace"]["commit"], std::string(40, 'a'));
}

}  // namespace
}  // namespace lathe::state
