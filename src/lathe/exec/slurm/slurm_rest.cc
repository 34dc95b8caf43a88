#include "lathe/exec/slurm/slurm_rest.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <fmt/format.h>

namespace lathe::exec {
namespace {

int64_t CeilDiv(int64_t n, int64_t d) { return (n + d - 1) / d; }

std::string Trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// An error of slurmrestd's that says the token was refused. 22.05 passes a
// bad or expired JWT on to slurmctld, which hangs up: error 5005, "Zero Bytes
// were transmitted or received" (observed); later versions answer 401 with
// "Invalid authentication credential" or an expired token.
bool AuthError(int64_t code, std::string_view text) {
  return code == 5005 || text.find("Zero Bytes were transmitted") != std::string_view::npos ||
         text.find("authentication credential") != std::string_view::npos ||
         text.find("xpired") != std::string_view::npos;
}

}  // namespace

// ---- tokens ----------------------------------------------------------------------

SlurmTokens::SlurmTokens(int64_t lifespan_ms, Mint mint, os::Clock& clock)
    : lifespan_ms_(std::max<int64_t>(lifespan_ms, 60'000)), mint_(std::move(mint)), clock_(clock) {}

Result<std::string> SlurmTokens::Get(const std::string& user) {
  std::lock_guard lock(mu_);
  const int64_t now = clock_.MonotonicMs();
  auto it = tokens_.find(user);
  // Renewed with a third of its life left: a submission never carries a token
  // that expires on its way, and a user who submits often mints once a
  // lifespan.
  if (it != tokens_.end() && it->second.expires_ms - now > lifespan_ms_ / 3) return it->second.jwt;
  ASSIGN_OR_RETURN(std::string jwt, mint_(user, CeilDiv(lifespan_ms_, 1000)));
  ++minted_;
  tokens_[user] = Token{jwt, now + lifespan_ms_};
  return jwt;
}

void SlurmTokens::Forget(const std::string& user) {
  std::lock_guard lock(mu_);
  tokens_.erase(user);
}

int64_t SlurmTokens::minted() const {
  std::lock_guard lock(mu_);
  return minted_;
}

Result<std::string> ParseScontrolToken(std::string_view out) {
  const size_t at = out.find("SLURM_JWT=");
  if (at == std::string_view::npos) {
    return Status::Unavailable("no SLURM_JWT= in scontrol token's answer: " +
                               Trimmed(out.substr(0, 200)));
  }
  std::string_view rest = out.substr(at + 10);
  const size_t end = rest.find_first_of(" \t\r\n");
  std::string jwt(rest.substr(0, end));
  if (jwt.empty()) return Status::Unavailable("scontrol token gave an empty token");
  return jwt;
}

// ---- the submission ----------------------------------------------------------------

std::string SlurmRestSubmitPath(const SlurmRestOptions& rest) {
  return "/slurm/" + rest.version + "/job/submit";
}

Json SlurmRestJob(const SlurmPoolOptions& pool, const std::string& lathe_path,
                  const LaunchRequest& req, const SlurmAttemptPaths& paths,
                  const std::map<std::string, std::string>& env) {
  const std::string out = SlurmFilenameLiteral(paths.slurm_out);
  const SlurmJobShape shape = SlurmJobShapeOf(pool, req);
  Json job = {
      {"name", "lathe-" + req.run_id},
      {"comment", fmt::format("lathe:{}:{}", req.run_id, req.attempt)},
      {"current_working_directory", SlurmWorkdir(req)},
      {"standard_output", out},
      {"standard_error", out},
      {"requeue", false},  // ignored by 22.05's v0.0.38: the backend turns it off after
      {"environment", env},
      {"nodes", Json::array({shape.nodes, shape.nodes})},
  };
  // One task per node, as sbatch --ntasks-per-node=1 (slurm_batch.h).
  if (shape.nodes > 1) {
    job["tasks_per_node"] = 1;
    job["tasks"] = shape.nodes;
  }
  if (!shape.partition.empty()) job["partition"] = shape.partition;
  if (!shape.account.empty()) job["account"] = shape.account;
  if (!shape.qos.empty()) job["qos"] = shape.qos;
  if (!shape.gres.empty()) job["gres"] = shape.gres;
  if (shape.cpus_per_task > 0) job["cpus_per_task"] = shape.cpus_per_task;
  if (shape.memory_mib > 0) job["memory_per_node"] = shape.memory_mib;
  if (shape.time_minutes > 0) job["time_limit"] = shape.time_minutes;
  return Json{{"script", SlurmBatchScript(lathe_path, paths.launch)}, {"job", std::move(job)}};
}

SlurmRestAnswer ParseSlurmRestSubmit(const SlurmRestReply& reply) {
  SlurmRestAnswer a;
  Json j = Json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  std::string errors;
  if (j.is_object()) {
    if (auto it = j.find("errors"); it != j.end() && it->is_array()) {
      for (const Json& e : *it) {
        if (!e.is_object()) continue;
        const int64_t code = e.value("error_code", e.value("error_number", int64_t{0}));
        std::string text = e.value("error", std::string());
        if (AuthError(code, text)) a.auth_failed = true;
        if (const std::string d = e.value("description", std::string()); !d.empty()) {
          text += (text.empty() ? "" : ": ") + d;
        }
        if (!text.empty()) errors += (errors.empty() ? "" : "; ") + text;
      }
    }
    if (auto it = j.find("job_id"); it != j.end() && it->is_number_integer() &&
                                    it->get<int64_t>() > 0 && reply.status / 100 == 2) {
      a.job_id = std::to_string(it->get<int64_t>());
      return a;  // submitted; errors such as "held" do not undo it
    }
  }
  if (reply.status == 401 || reply.status == 403) a.auth_failed = true;
  a.error = fmt::format("HTTP {}", reply.status);
  if (!errors.empty()) {
    a.error += ": " + errors;
  } else if (!j.is_object()) {
    a.error += ": " + Trimmed(std::string_view(reply.body).substr(0, 200));
  }
  return a;
}

}  // namespace lathe::exec
