// How a doctor Report is shown: a table for people, JSON for tools, and the
// --fix-script shell script. All text comes from the data files in the
// chosen language; parameter names and commands stay as they are.
#pragma once

#include <string>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"
#include "lathe/doctor/doctor.h"

namespace lathe::doctor {

struct TableOptions {
  Lang lang = Lang::kEn;
  bool color = false;   // ANSI colours (only on a terminal)
  bool details = true;  // scenario / cause / verify / fix under each warn and fail
};

// One line per check under its group's heading, with ✓ ⚠ ✗ or – and the
// finding; problems get their scenario, cause, verify command and fix
// indented below; a summary line ends it.
std::string FormatReportTable(const Report& report, const TableOptions& options);

// {"lang", "summary": {"ok","warn","fail","skipped"}, "exit_code",
//  "checks": [{"id", "group", "title", "severity", "outcome", "finding",
//              "values": {name: value}, "scenario", "cause", "verify", "fix"}]}
// (scenario … fix are null for ok and skipped checks).
Json ReportToJson(const Report& report, Lang lang, bool strict);

// A POSIX shell script with the fix of every warn and fail, as comments and
// the outcome's fix_script lines (measured values shell-quoted). It is
// printed for review, never run.
std::string FormatFixScript(const Report& report, Lang lang);

// 'value' with embedded single quotes escaped, for POSIX sh.
std::string ShellQuote(std::string_view value);

}  // namespace lathe::doctor
