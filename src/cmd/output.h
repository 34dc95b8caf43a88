// Small helpers for human output: tables, ages, JSON printing.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"

namespace lathe::cmd {

// Prints rows as columns separated by two spaces; the first row is the header.
void PrintTable(const std::vector<std::vector<std::string>>& rows);
// Prints `j` as the command's one JSON answer; main() then prints no error
// object after it (JsonAnswered).
void PrintJson(const Json& j);
// A failure as the API's error object (docs/api.md "Errors": error, code,
// msg_id, args, en, zh) on one line of stdout, with `extra`'s fields added
// (the run it is about). Also counts as the command's JSON answer.
void PrintJsonError(const Status& s, const Json& extra = Json::object());
// Whether the command printed its JSON answer (PrintJson, PrintJsonError, or
// MarkJsonAnswered for one printed otherwise): with --json, main() prints a
// failure's error object on stdout only when it did not.
bool JsonAnswered();
// Whether the command `app` parsed was given --json.
bool JsonAsked(const CLI::App& app);
// `--json` among the words before `--`: for an error of the command line
// itself, found before the flags were read.
bool JsonInArgs(const std::vector<std::string>& args);
// That error as the error object (code invalid_argument, msg_id cli.usage).
void PrintJsonUsageError(const std::string& en, const std::string& zh);
void MarkJsonAnswered();
// "3s", "5m", "2h", "4d" since `ms` (epoch milliseconds); "3 秒"… in
// Chinese; "-" for no time.
std::string Age(int64_t ms, Lang lang);
// "3s ago", "3 秒前".
std::string AgeAgo(int64_t ms, Lang lang);
// Columns `s` takes on a terminal (CJK characters two).
size_t DisplayWidth(const std::string& s);
// A label padded with spaces to `width` columns, at least one space after it:
// the fields of `lathe inspect` line up in every language.
std::string Label(const std::string& label, size_t width);
bool IsTerminal();  // stdout is a TTY
// Opens `url` in the user's browser through a private page, never with the
// link on a command line (api/browser_page.h): "" when it did, else why not,
// for the caller's message.
std::string OpenInBrowser(const std::string& url);
// "3 of 4" (status.quota_of), or "3 (no limit)" when `limit` is null.
std::string QuotaUsageOf(const Json& used, const Json& limit, Lang lang);
// A project's limits next to its usage (GET /projects/{name}'s `limits` and
// `usage`): "limits: GPUs 1 of 2, runs 1 (no limit), ..."; "" when the
// project has no limit.
std::string ProjectLimitsLine(const Json& limits, const Json& usage, Lang lang);
// Project `p`'s usage (GET /projects/{name}: `name`, `usage`) as catalog
// message `msg_id` says it: its GPU-hours in the window, active runs, GPUs held.
std::string ProjectUsageLine(const std::string& msg_id, const Json& p, Lang lang);
// How an object in a list reached the caller, from its `shared` ({role, by},
// docs/sharing.md): "alice (view)", "project ml (use)", "public (use)" (in
// Chinese too); "" for the caller's own (no `shared`).
std::string SharedMark(const Json& obj, Lang lang);
// When any of `items` (a JSON array) is shared with the caller: the SHARED BY
// column at index `at` of `rows` (rows[0] the header, rows[i + 1] the row of
// items[i]), "-" for the caller's own.
void AddSharedColumn(std::vector<std::vector<std::string>>& rows, const Json& items, size_t at,
                     Lang lang);
// A role as a person reads it: "owner" is 所有者 in Chinese; view, use and
// manage stay what --role takes.
std::string RoleText(const std::string& role, Lang lang);

}  // namespace lathe::cmd
