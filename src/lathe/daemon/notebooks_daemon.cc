// The daemon's side of notebooks (notebooks.h, notebook_watch.h): the
// watch's hooks, restart, and what the API shows of a notebook.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/common/i18n.h"
#include "lathe/common/units.h"
#include "lathe/daemon/daemon.h"
#include "lathe/daemon/notebooks.h"

namespace lathe::daemon {

using run::RunState;
using state::RunRecord;

NotebookWatch::Hooks Daemon::NotebookHooks() {
  NotebookWatch::Hooks h;
  h.targets = [this] {
    std::vector<NotebookTarget> out;
    MutexLock lock(&mu_);
    auto running = store_->InStates({RunState::kRunning});
    if (!running.ok()) return out;
    for (const auto& r : *running) {
      if (!IsNotebook(r) || r.backend != backend_->Name()) continue;
      auto token = CachedNotebookToken(r);
      if (!token.ok()) continue;
      NotebookTarget t;
      t.run_id = r.id;
      t.attempt = r.attempt;
      t.uid = r.uid;
      t.any_owner = r.uid == 0;
      t.socket = NotebookSocket(r.run_dir);
      t.token = *token;
      t.idle_ms = r.spec.idle_ms;
      t.gpus = r.gpus;
      out.push_back(std::move(t));
    }
    return out;
  };
  h.gpu_utilization = [this] {
    std::map<int, int> util;
    auto sample = gpu_source_->Sample();
    if (!sample.ok()) return util;
    for (const auto& g : sample->gpus) {
      if (g.utilization_gpu_pct) util[g.index] = *g.utilization_gpu_pct;
    }
    return util;
  };
  h.on_ready = [this](const NotebookTarget& t) {
    MutexLock lock(&mu_);
    // Best effort: an event only tells; what it tells of is stored already.
    (void)store_->AddEvent(t.run_id, "info", Tr("notebook.ready", Lang::kEn),
                           Json{{"msg_id", "notebook.ready"}, {"attempt", t.attempt}},
                           clock_.NowMs());
    Notify();
  };
  h.on_idle = [this](const NotebookTarget& t, const Json& why) {
    MutexLock lock(&mu_);
    auto r = store_->Get(t.run_id);
    if (!r.ok() || r->state != RunState::kRunning || r->attempt != t.attempt) return;
    const std::string idle =
        FormatDuration(std::chrono::milliseconds(why.value("idle_ms", int64_t{0})));
    std::string gpu;
    if (why.contains("gpu_busy_pct")) {
      gpu = Tr("notebook.idle_gpu", Lang::kEn,
               {{"pct", std::to_string(why.value("gpu_busy_pct", 0))}});
    }
    const std::string said =
        Tr("notebook.idle_stop", Lang::kEn, {{"idle", idle}, {"gpu", gpu}, {"run", r->id}});
    Json data = why;
    data["msg_id"] = "notebook.idle_stop";
    data["msg_args"] = {{"idle", idle}, {"gpu", gpu}, {"run", r->id}};
    // Best effort: an event only tells; what it tells of is stored already.
    (void)store_->AddEvent(r->id, "warning", said, data, clock_.NowMs());
    // Best effort: BeginStop logs a failure; the run stays active and the next pass looks again.
    (void)BeginStop(*r, run::StopIntent::kIdle, "stopped: idle for " + idle);
    kicked_ = true;
    loop_cv_.SignalAll();
  };
  return h;
}

Result<RunRecord> Daemon::RestartRun(const Caller& caller, const std::string& ref) {
  ASSIGN_OR_RETURN(RunRecord r, Access(caller, ref, AccessAction::kStop));
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(r, store_->Get(r.id));
  if (!IsNotebook(r)) {
    return Status::Msg(Code::kFailedPrecondition, "notebook.not_notebook",
                       {{"run", ref}, {"kind", std::string(run::RunKindName(r.kind))}});
  }
  if (!run::IsTerminal(r.state)) {
    return Status::Msg(Code::kFailedPrecondition, "notebook.not_finished",
                       {{"run", ref}, {"state", std::string(run::StateName(r.state))}});
  }
  RETURN_IF_ERROR(CheckSubmittable(r.spec, caller));
  r.stop_intent = run::StopIntent::kNone;
  r.reason.clear();
  r.finished_at_ms = 0;
  r.exit_code.reset();
  r.signal.reset();
  r.oom_killed = false;
  RETURN_IF_ERROR(Transition(r, RunState::kQueued, "restarted by " + caller.user));
  kicked_ = true;
  loop_cv_.SignalAll();
  return r;
}

// A run's token never changes: read once, then from memory (the watch asks
// every pass, the proxy every request). Needs mu_.
Result<std::string> Daemon::CachedNotebookToken(const RunRecord& r) {
  auto it = notebook_tokens_.find(r.id);
  if (it != notebook_tokens_.end()) return it->second;
  ASSIGN_OR_RETURN(std::string token, NotebookToken(r.run_dir));
  if (notebook_tokens_.size() > 4096) notebook_tokens_.clear();  // bounded; re-read as needed
  notebook_tokens_[r.id] = token;
  return token;
}

std::string Daemon::NotebookTokenOf(const RunRecord& r) {
  if (!IsNotebook(r)) return "";
  MutexLock lock(&mu_);
  auto token = CachedNotebookToken(r);
  return token.ok() ? *token : "";
}

Json Daemon::NotebookJson(const RunRecord& r) {
  if (!IsNotebook(r)) return nullptr;
  Json j = {{"kernels", r.spec.kernels}};
  const int64_t limit =
      r.spec.idle_ms >= 0 ? r.spec.idle_ms : notebooks_->options().default_idle_ms;
  j["idle_limit_ms"] = limit;
  if (run::IsActive(r.state)) {
    if (auto a = notebooks_->Activity(r.id)) {
      j.update(ActivityToJson(*a, clock_.NowMs()));
      j["idle_limit_ms"] = limit;
    } else {
      j["ready"] = false;
    }
  }
  return j;
}

}  // namespace lathe::daemon
