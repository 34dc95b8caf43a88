// Daemon: queued runs whose image is pulled while they wait (image_puller.h).
#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "lathe/common/i18n.h"
#include "lathe/daemon/daemon.h"

namespace lathe::daemon {

using run::RunState;
using state::RunRecord;

namespace {

bool AwaitsPull(const RunRecord& r) { return !r.spec.image.empty() && r.spec.image_id.empty(); }

}  // namespace

void Daemon::ApplyEndedPulls() {
  std::vector<ImagePuller::Pulled> ended = puller_->TakeEnded();
  if (ended.empty()) return;
  // Copies first: the store's queued records change with each write below.
  std::vector<RunRecord> waiting;
  for (const RunRecord* r : store_->Queued()) {
    if (AwaitsPull(*r)) waiting.push_back(*r);
  }
  for (RunRecord& r : waiting) {
    auto p = std::find_if(ended.begin(), ended.end(), [&](const ImagePuller::Pulled& p) {
      return p.uid == r.uid && p.ref == r.spec.image;
    });
    if (p == ended.end()) continue;
    if (p->id.ok()) {
      r.spec.image_id = *p->id;
      Status st = store_->SaveSpec(
          r, "image", fmt::format("pulled {} (sha256:{})", p->ref, p->id->substr(0, 12)),
          clock_.NowMs());
      if (!st.ok()) spdlog::error("run {}: its image id not saved: {}", r.id, st.ToString());
    } else {
      r.reason = Tr("image.queued_pull_failed", Lang::kEn,
                    {{"ref", p->ref}, {"why", p->id.status().message()}});
      r.finished_at_ms = clock_.NowMs();
      (void)Transition(r, RunState::kStopped, r.reason);  // logs its own failure
    }
  }
  pass_needed_ = true;
}

std::vector<std::pair<std::string, Daemon::WaitNote>> Daemon::HoldBackPulls(
    std::vector<const RunRecord*>& queued) {
  std::vector<std::pair<std::string, WaitNote>> held;
  std::erase_if(queued, [&](const RunRecord* run) REQUIRES(mu_) {
    const RunRecord& r = *run;
    if (!AwaitsPull(r)) return false;
    if (!puller_->InFlight(r.uid, r.spec.image)) {
      std::optional<std::string> credentials;
      if (!r.spec.image_secret.empty()) {
        // A secret removed since fails the pull, which says so.
        auto values = secrets_->SecretEnv(r.uid, r.user, {r.spec.image_secret});
        if (values.ok()) credentials = values->at(r.spec.image_secret);
      }
      puller_->Want(r.uid, r.spec.image, credentials);
    }
    held.emplace_back(r.id, WaitNote{Tr("event.image_pulling", Lang::kEn, {{"ref", r.spec.image}}),
                                     "image_pull", ""});
    return true;
  });
  return held;
}

}  // namespace lathe::daemon
