// The daemon's watch over its running notebooks (docs/notebooks.md, "Idle
// stop"): when each first answers (ready), and when each has been idle for
// its whole idle period, so that a forgotten notebook gives its GPUs back.
//
// A notebook is active at an instant when any of these holds:
//   - a kernel is busy (execution_state busy or starting in Jupyter's
//     /api/kernels), or a kernel's own last_activity moved since the last
//     look — a cell that computes and prints nothing is busy;
//   - a client sent something through the proxy: an HTTP request other than
//     a read of /api/ (the tree page's polls), or a websocket data frame
//     (an execute, a comm or an input message; pings and pongs of an open
//     but silent tab are not);
//   - one of its GPUs is at or above the utilization threshold, where the
//     GPU source reports utilization;
//   - Jupyter could not be asked (what cannot be seen is not idle).
// The daemon's own polls never count: Jupyter 6 bumps its server-wide
// last_activity on every authenticated API request, so that field is not
// read; /api/kernels' per-kernel last_activity moves only with kernel
// messages.
//
// Idle for the notebook's idle period (its spec's idle, else the daemon's
// default; 0: never) after its last activity (or its start, or the daemon's
// start for one re-adopted after a restart, whichever is later): on_idle,
// once per attempt; the daemon stops it with a grace period.
//
// Threads: one thread of its own asks Jupyter (blocking I/O, never under the
// daemon's mutex). NoteClient is called by the proxy's threads; Activity by
// API threads. All state is guarded by mu_.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "lathe/common/json.h"
#include "lathe/common/status.h"
#include "lathe/os/clock.h"

namespace lathe::daemon {

struct NotebookWatchOptions {
  int poll_ms = 10000;                // between two looks at a ready notebook
  int ready_poll_ms = 50;             // between two tries of one not ready yet
  int gpu_busy_pct = 5;               // a GPU at or above this utilization is busy
  int64_t default_idle_ms = 1800000;  // for a spec without idle (config notebooks.idle)
  int request_timeout_ms = 5000;
};

// A running notebook, as the daemon hands it to the watch.
struct NotebookTarget {
  std::string run_id;
  int attempt = 0;
  uid_t uid = 0;           // Jupyter's socket must be this user's
  bool any_owner = false;  // a root run's
  std::string socket;
  std::string token;
  int64_t idle_ms = -1;  // the spec's; -1: the default
  std::vector<int> gpus;
};

// What the watch knows of one notebook (GET /runs/{run} shows it).
struct NotebookActivity {
  bool ready = false;
  int kernels = 0;
  int busy_kernels = 0;
  int64_t last_active_ms = 0;  // wall clock
  std::string last_active_by;  // "kernel", "client", "gpu", "start", "unknown"
  int64_t idle_limit_ms = 0;   // 0: never stopped for idleness
};
Json ActivityToJson(const NotebookActivity& a, int64_t now_ms);

// Whether a client's request through the proxy is the user at work (not a
// page's background read of /api/).
bool IsClientActivity(std::string_view method, std::string_view path);

// Counts the websocket data frames a client sends (RFC 6455: the client's
// frames are masked; opcodes 0-2 are data, 8-10 control) across the bytes
// of a tunnel as they come, in any split.
class WsDataFrames {
 public:
  size_t Feed(std::string_view bytes);  // data frames that began in `bytes`

 private:
  std::string header_;  // the current frame's header so far
  uint64_t payload_left_ = 0;
};

class NotebookWatch {
 public:
  struct Hooks {
    std::function<std::vector<NotebookTarget>()> targets;
    // GPU index -> utilization %, for the GPUs that report it.
    std::function<std::map<int, int>()> gpu_utilization;
    std::function<void(const NotebookTarget&)> on_ready;
    // `why`: {idle_ms, last_active_ms, last_active_by, gpu_busy_pct (when GPUs count)}.
    std::function<void(const NotebookTarget&, const Json& why)> on_idle;
  };
  NotebookWatch(NotebookWatchOptions options, os::Clock& clock, Hooks hooks);
  ~NotebookWatch();  // Stop()

  void Start();
  void Stop();
  void Pass();  // one look at every notebook due (the thread's body; tests call it)

  void NoteClient(const std::string& run_id);
  std::optional<NotebookActivity> Activity(const std::string& run_id);
  const NotebookWatchOptions& options() const { return opts_; }

 private:
  struct Seen {
    int attempt = 0;
    bool ready = false;
    bool idle_told = false;
    int64_t next_look_mono = 0;
    int64_t last_active_ms = 0;
    std::string last_active_by;
    int kernels = 0, busy = 0;
    int64_t limit = 0;
    bool gpu_reported = false;  // the GPU source gave a utilization for its GPUs
    std::map<std::string, std::string> kernel_activity;  // id -> last_activity
  };
  // Asks Jupyter `path` through its socket; the HTTP status and body.
  Result<std::pair<int, std::string>> Ask(const NotebookTarget& t, const std::string& path) const;
  void Look(const NotebookTarget& t, Seen& s, int64_t now_ms);
  int64_t IdleLimit(const NotebookTarget& t) const;

  const NotebookWatchOptions opts_;
  os::Clock& clock_;
  Hooks hooks_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, Seen> seen_;          // by run id
  std::map<std::string, int64_t> client_ms_;  // by run id: the last client message
  std::thread thread_;
};

}  // namespace lathe::daemon
