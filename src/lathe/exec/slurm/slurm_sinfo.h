// What Slurm says about a cluster's partitions, read into Lathe's terms: one
// node-oriented sinfo for every partition, its output summed per partition
// (exec::Partition in backend.h), and Slurm's time formats. Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/exec/backend.h"

namespace lathe::exec {

// The arguments after `sinfo`: one line per node and partition, with no
// header and no padding (a size of 0), fields separated by '|':
//   PartitionName|Partition (a '*' after the default)|NodeList|StateLong|
//   CPUsState (A/I/O/T)|Gres|GresUsed|Memory (MB)|Time (MaxTime)|Available
// e.g. "debug|debug*|n1|mixed|1/1/0/2|gpu:fake:2|gpu:fake:1(IDX:0)|4000|infinite|up".
// A partition without nodes has no line, and so is not listed.
std::vector<std::string> SinfoArgs();

// The partitions of SinfoArgs' output, in the order sinfo first names them.
// A line with the wrong number of fields or a count that is not a number is
// InvalidArgument naming the line (another Slurm's format is not guessed
// at); an unreadable GRES counts no GPUs, an unreadable time no limit.
Result<std::vector<Partition>> ParseSinfo(std::string_view out);

// A Slurm duration in milliseconds: "infinite" and "UNLIMITED" (any case)
// are -1; "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS" as
// sbatch's --time reads them. nullopt for anything else: "", "n/a", "1:2:3:4",
// a negative number or a value past ~290 million years.
std::optional<int64_t> ParseSlurmDuration(std::string_view s);

// How many GPUs a GRES string names: "gpu:a100:4(S:0-1),shard:8" is 4 of
// type a100; "gpu:2", "gpu:fake:1(IDX:0)", "gpu:a100:1(IDX:0),gpu:v100:0(IDX:N/A)"
// (GresUsed). Other GRES, "(null)" and unreadable counts are 0. `types` (may
// be null) gets the types named, once each, in order.
int GresGpuCount(std::string_view gres, std::vector<std::string>* types = nullptr);

// Where a node's StateLong puts it: "idle" (also powered down "idle~"),
// allocated (allocated, mixed, completing and their flags), down (down,
// drained, draining, fail, failing, a '*' not responding), or other
// (reserved, planned, future, unknown, a state this Lathe does not know).
enum class SlurmNodeClass { kIdle, kAllocated, kDown, kOther };
SlurmNodeClass ClassifyNodeState(std::string_view state_long);

}  // namespace lathe::exec
