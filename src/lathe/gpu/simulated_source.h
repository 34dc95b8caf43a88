// Simulated GPUs, for machines without any: the scheduler, the API and the UI
// behave as on a GPU server, and every sample says simulated=true.
//
// Spec: "sim:" GROUP ["," GROUP …] ["@" LOADFILE], where a GROUP is
//   N          N GPUs of 24GB                       sim:4
//   NxSIZE     SIZE each, in Lathe's units          sim:4x24GB, sim:2x80GiB
//   …:MODEL    named after a model                  sim:2x80GB:A100
// and 1 ≤ N, with at most 64 GPUs in all. Groups are numbered in order:
// "sim:2x80GB:A100,2x24GB:L4" is GPUs 0-1 A100, 2-3 L4. MODEL is letters,
// digits, spaces, '.', '-' and '_' (at most 64); the GPUs are named
// "NVIDIA MODEL (simulated)" ("MODEL (simulated)" when MODEL already starts
// with NVIDIA or AMD); a group without a model is named "Simulated GPU".
//
// LOADFILE, an absolute path, is what the GPUs report (format: sim_load.h).
// It is read again whenever it changed (its stat(2) stamp; a file modified
// within the last second of a read is read again regardless, as timestamps
// are coarse). No file: every GPU idle. A file that cannot be read or parsed:
// the last good load stays and Inventory::note names the problem.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/gpu/source.h"
#include "lathe/os/clock.h"
#include "lathe/os/files.h"

namespace lathe::gpu {

inline constexpr int kMaxSimulatedGpus = 64;
inline constexpr uint64_t kDefaultSimulatedMemoryBytes = 24'000'000'000ULL;  // "24GB"
inline constexpr size_t kMaxSimulatedModelChars = 64;

struct SimGroup {
  int count = 0;
  uint64_t memory_bytes = kDefaultSimulatedMemoryBytes;  // per GPU
  std::string model;                                     // as written; empty: unnamed
};

struct SimSpec {
  std::vector<SimGroup> groups;  // at least one
  std::string load_path;         // absolute; empty: no load file
  int TotalCount() const;
};

// Parses "sim:…"; anything else is InvalidArgument (catalog id gpu.sim_spec)
// naming the value, the part that is wrong and the allowed forms.
Result<SimSpec> ParseSimSpec(std::string_view spec);

// GPU i has uuid "GPU-sim-000i" (4 digits); idle, it has all its memory free,
// utilization 0, no throttling, no ECC errors, no processes, and unknown
// temperature, clocks and power.
//
// Thread-safe: Sample() may be called from any thread (a mutex guards the
// cached load).
class SimulatedSource : public GpuSource {
 public:
  // `clock` (not owned) must outlive the source; it dates the reads of the
  // load file.
  explicit SimulatedSource(SimSpec spec, os::Clock& clock = os::RealClock());
  static Result<std::unique_ptr<SimulatedSource>> Create(std::string_view spec);

  Result<Inventory> Sample() override;

 private:
  // Re-reads the load file when it changed; sets load_note_. Needs mu_.
  void RefreshLoad();

  // Constant after construction.
  const SimSpec spec_;
  os::Clock& clock_;
  const std::vector<GpuInfo> idle_;  // every GPU, idle
  const std::string spec_note_;

  std::mutex mu_;
  // Guarded by mu_: the GPUs as the last good load left them, the stamp of
  // the file read last and when, and what the note says about the load.
  std::vector<GpuInfo> loaded_;
  std::optional<os::FileStamp> stamp_;
  int64_t read_at_ms_ = 0;
  std::string load_note_;
};

}  // namespace lathe::gpu
