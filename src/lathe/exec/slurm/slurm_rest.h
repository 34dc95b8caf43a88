// Submitting a Slurm pool's jobs through slurmrestd (the pool's `rest:`),
// as the run's user: the daemon (root) mints a short-lived JWT for that user
// (`scontrol token username=U lifespan=S`, which only root or SlurmUser may
// do for another user), keeps it while more than a third of its lifespan is
// left, and sends it with X-SLURM-USER-NAME / X-SLURM-USER-TOKEN. slurmctld
// then runs and accounts the job as the user, as for sbatch run with their
// identity (slurm_commands.h). When anything on this path fails, the backend
// submits with sbatch and logs why (slurm_backend.h).
//
// What slurmrestd's openapi/v0.0.38 (Slurm 22.05) does not honour, and how
// the backend makes up for it:
//   - `requeue: false` is ignored (the job keeps the cluster's JobRequeue):
//     after the submission the user's `scontrol update JobId=N Requeue=0`.
//   - a signal for the batch shell (`B:USR1@90`) is refused: the monitor
//     keeps the job's time itself (LaunchConfig::warn_after_ms).
//   - #SBATCH lines in the script are not read: every option is in "job".
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/exec/backend.h"
#include "lathe/exec/slurm/slurm_batch.h"
#include "lathe/exec/slurm/slurm_options.h"
#include "lathe/os/clock.h"

namespace lathe::exec {

struct SlurmRestReply {
  int status = 0;    // the HTTP status
  std::string body;  // JSON, as slurmrestd answered
};

// How the backend reaches slurmrestd (exec does not link an HTTP client: the
// binary hands one in, node/slurm_rest_http.h; tests answer with a fake).
class SlurmRestTransport {
 public:
  virtual ~SlurmRestTransport() = default;
  // POSTs `body` (JSON) to `path` with `headers`. An answer with any HTTP
  // status is a reply; errors are for no answer: kUnavailable (no
  // connection), kDeadlineExceeded (none in time). Thread-safe: Launch runs
  // on several threads at once.
  virtual Result<SlurmRestReply> Post(const std::string& path, const std::string& body,
                                      const std::map<std::string, std::string>& headers) = 0;
};

// Makes the transport for a pool's slurmrestd (`url` as SlurmRestOptions
// has it), each request bounded by `timeout_ms`; InvalidArgument for a URL
// it cannot use.
using SlurmRestTransportFactory = std::function<Result<std::unique_ptr<SlurmRestTransport>>(
    const std::string& url, int64_t timeout_ms)>;

// Each user's token, minted when missing or when less than a third of its
// lifespan is left. Thread-safe; minting happens under the lock (a few
// milliseconds, once per user per lifespan).
class SlurmTokens {
 public:
  // Mints a token for `user` that lives `lifespan_s` seconds.
  using Mint = std::function<Result<std::string>(const std::string& user, int64_t lifespan_s)>;
  SlurmTokens(int64_t lifespan_ms, Mint mint, os::Clock& clock);
  // `user`'s token; the mint's error when a new one was needed and failed.
  Result<std::string> Get(const std::string& user);
  // Forgets `user`'s token (slurmrestd refused it): the next Get mints.
  void Forget(const std::string& user);
  int64_t minted() const;  // tokens minted so far (for tests)

 private:
  struct Token {
    std::string jwt;
    int64_t expires_ms = 0;  // steady clock
  };
  const int64_t lifespan_ms_;
  const Mint mint_;
  os::Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, Token> tokens_;  // guarded by mu_
  int64_t minted_ = 0;                   // guarded by mu_
};

// The token in `scontrol token`'s output ("SLURM_JWT=<token>").
Result<std::string> ParseScontrolToken(std::string_view out);

// The body of POST /slurm/<version>/job/submit for one attempt: the batch
// script (SlurmBatchScript) and the options SbatchArgv gives sbatch, as
// v0.0.38's job properties, with `env` as the job's environment (what
// sbatch --export=ALL would pass: SlurmCommandEnv).
Json SlurmRestJob(const SlurmPoolOptions& pool, const std::string& lathe_path,
                  const LaunchRequest& request, const SlurmAttemptPaths& paths,
                  const std::map<std::string, std::string>& env);

// slurmrestd's answer to a submission.
struct SlurmRestAnswer {
  std::string job_id;        // "" when it did not submit
  std::string error;         // why not: its errors, or the HTTP status
  bool auth_failed = false;  // the token was refused (a new one may do)
};
SlurmRestAnswer ParseSlurmRestSubmit(const SlurmRestReply& reply);

// The request's path: /slurm/<version>/job/submit.
std::string SlurmRestSubmitPath(const SlurmRestOptions& rest);

}  // namespace lathe::exec
