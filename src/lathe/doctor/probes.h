// The facts the doctor's checks need that are slow or may hang to find out:
// the GPU sample (NVML), the torch of each Python (importing torch takes
// seconds), the CUDA toolkit (nvcc / libcudart) and a DNS lookup. They are
// gathered once, in parallel, each under a hard timeout, before the checks
// run; the checks themselves only read Facts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/doctor/cluster_probes.h"
#include "lathe/doctor/system_view.h"
#include "lathe/gpu/inventory.h"

namespace lathe::doctor {

enum class ProbeState {
  kNotRun,    // not needed (group not selected) or skipped by --fast
  kDone,      // ran; see the fields
  kTimedOut,  // killed at its timeout
  kFailed,    // could not run or gave output that makes no sense; see error
};

struct TorchProbe {
  std::string python;  // the interpreter, e.g. "/usr/bin/python3"
  ProbeState state = ProbeState::kNotRun;
  std::string error;  // why it failed, or the ImportError when !importable
  bool importable = false;
  std::string version;  // torch.__version__, "2.3.1+cu121"
  std::string cuda;     // torch.version.cuda, "12.1"; empty for a CPU-only build
  bool cuda_available = false;
  std::string cuda_error;                 // torch's warning when is_available() is False
  std::vector<std::string> arch_list;     // torch.cuda.get_arch_list(): "sm_80", "compute_90"
  std::vector<std::string> capabilities;  // per visible device: "8.6"
};

struct ToolkitProbe {
  ProbeState state = ProbeState::kNotRun;
  std::string path;     // nvcc or libcudart found; empty when none
  std::string version;  // "12.1"; empty when none was found
  std::string error;
};

struct DnsProbe {
  ProbeState state = ProbeState::kNotRun;
  std::string name;     // the name looked up
  std::string address;  // the first address it resolved to
  std::string error;
};

struct DaemonProbe {
  ProbeState state = ProbeState::kNotRun;
  bool up = false;
  std::string where;   // the socket or address tried
  std::string reason;  // why it is not up
};

struct StoreProbe {
  ProbeState state = ProbeState::kNotRun;
  std::string path;        // the store checked; empty when there is none to check
  std::string unreadable;  // a store that exists but this user may not read
  std::string error;
  uint64_t snapshots = 0, packs = 0, chunks = 0, problems = 0;
  std::string first_problem;
};

struct CaptureProbe {
  ProbeState state = ProbeState::kNotRun;
  CaptureResult result;
  std::string error;
};

struct Facts {
  bool gpus_sampled = false;
  Result<gpu::Inventory> gpus = gpu::Inventory{};
  std::vector<TorchProbe> torch;  // one per distinct Python; empty when not run
  bool torch_skipped_fast = false;
  ToolkitProbe toolkit;
  DnsProbe dns;
  DaemonProbe daemon;
  StoreProbe store;
  CaptureProbe capture;
  // The cluster group: the pools it was asked about and what was found.
  bool cluster_probed = false;
  bool cluster_skipped_fast = false;
  ClusterOptions cluster;
  std::vector<ClusterProbe> clusters;  // one per cluster.pools entry
  int64_t torch_timeout_ms = 0;
  int64_t store_timeout_ms = 0;
};

struct ProbeOptions {
  bool fast = false;               // skip the slow probes: torch import and DNS
  bool gpu = true;                 // gather the GPU group's facts
  bool network = true;             // gather the network group's facts
  bool lathe = true;               // gather the lathe group's facts (is the daemon up?)
  bool cluster = true;             // gather the cluster group's facts (each Slurm pool)
  ClusterOptions cluster_options;  // the pools, from the daemon's config
  int64_t torch_timeout_ms = 20000;
  int64_t nvcc_timeout_ms = 5000;
  int64_t dns_timeout_ms = 3000;
  int64_t store_timeout_ms = 10000;    // `lathe snap fsck` of the daemon's store
  int64_t capture_timeout_ms = 15000;  // the capture round trip through the daemon
  std::string dns_name = "pypi.org";
  // `lathe doctor --image IMG`: torch is probed in this image of the user's
  // (through the daemon, with one GPU where the machine has any) instead of
  // in the host's Pythons; the GPUs and the driver stay the host's.
  std::string image;
  int64_t image_timeout_ms = 120000;  // the container's start, and torch's import in it
};

// Runs the needed probes in parallel and waits for all of them (each is
// bounded by its own timeout; the NVML sample is bounded by the driver).
Facts GatherFacts(const SystemView& view, const ProbeOptions& options);

// ---- parsers, exposed for tests -------------------------------------------
// The Python snippet run for each interpreter; it prints one JSON object.
std::string_view TorchProbeScript();
// Fills `p` from the snippet's output (its last line that is a JSON object:
// a run's log may hold warnings before it); kFailed with error when there is
// none.
void ParseTorchProbeOutput(std::string_view out, TorchProbe& p);
// "Cuda compilation tools, release 12.1, V12.1.105" → "12.1"; "" when absent.
std::string ParseNvccVersion(std::string_view out);
// "libcudart.so.12.1.105" → "12.1"; "" when the name has no version.
std::string CudartVersionFromName(std::string_view file_name);

}  // namespace lathe::doctor
