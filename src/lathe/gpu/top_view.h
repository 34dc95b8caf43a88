// What `lathe top` shows (docs/cli.md, "lathe top"): the GPUs — utilization
// bar, memory, temperature, power, throttle reasons and the run holding each
// — then the runs holding GPUs and the queue, in the reader's language.
//
// A pure function of the API's answers, so that the same frame is drawn on a
// terminal (refreshed in place by the command) and printed once as plain
// text when stdout is not a terminal. Columns are counted on the screen (a
// CJK character takes two).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"

namespace lathe::gpu {

struct TopInput {
  Json gpus;  // GET /api/v1/gpus
  Json runs;  // GET /api/v1/runs: {"runs": [...]}, each {id, name, user, state, gpus, priority,
              // started_at_ms}
  int64_t now_ms = 0;  // wall time of the frame, for how long runs have run
};

// The frame's lines, without escape codes or newlines. `width` > 0 cuts every
// line to that many columns (a terminal's width); 0 leaves them whole.
std::vector<std::string> RenderTop(const TopInput& in, Lang lang, size_t width = 0);

// "[#######...]": `pct` (0-100) of `cells` cells filled; "[" + spaces + "]"
// for an unknown value (negative).
std::string UtilizationBar(int pct, size_t cells);

}  // namespace lathe::gpu
