// How `lathe explain` shows its matches: text for people (in the chosen
// language; commands and matched log lines as they are) and JSON for tools.
#pragma once

#include <string>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"
#include "lathe/doctor/explainer.h"

namespace lathe::doctor {

// "1. [cuda.no_kernel_image] <title>" then the matched line and the
// scenario, cause, verify command, fix and related `lathe term` words.
std::string FormatMatches(const std::vector<KbMatch>& matches, Lang lang, bool color);

// [{"id", "score", "line_no", "line", "title", "scenario", "cause", "verify",
//   "fix", "terms"}] with texts in `lang`.
Json MatchesToJson(const std::vector<KbMatch>& matches, Lang lang);

}  // namespace lathe::doctor
