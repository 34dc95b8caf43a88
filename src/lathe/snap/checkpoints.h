// Which files of a snapshot are checkpoints, whether each is complete, and
// which one a restarted job should resume from.
//
// A checkpoint is either
//   - a directory written file by file and meant as one unit: Hugging Face
//     Trainer's checkpoint-500/ (and its tmp-checkpoint-500/ while being
//     written, always incomplete), DeepSpeed's global_step500/, or step_500/;
//     it is complete when it holds at least one file and none is incomplete;
//   - otherwise a single file in a recognised format (format_check.h) that
//     is not inside such a directory; complete unless its check failed.
// Steps come from the directory name, or the last run of digits in a file's
// name (ckpt_000500.pt -> 500).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "lathe/snap/manifest.h"

namespace lathe::snap {

// The step in a checkpoint directory's name, or nullopt when the name is not
// one. *tmp is set for names marking a directory still being written.
std::optional<int64_t> CheckpointDirStep(std::string_view name, bool* tmp);

// Groups `files` (sorted by path) into checkpoints, sorted by path.
std::vector<Checkpoint> FindCheckpoints(const std::vector<FileEntry>& files);

// The checkpoint to resume from: the complete one written last (newest
// mtime; the higher step on a tie). nullopt when none is complete.
std::optional<Checkpoint> ChooseResume(const Manifest& m);

}  // namespace lathe::snap
