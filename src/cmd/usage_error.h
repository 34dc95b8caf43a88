// Turns a command-line parse error into a message that names what is wrong:
// the unknown flag or command word, the nearest valid one, and for `lathe run`
// a forgotten `--` before the command. Texts come from the message catalog
// (ids cli.unknown_*), in the user's language.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "lathe/common/i18n.h"

namespace lathe::cmd {

// Reads `args` (argv without the program name) against the command tree of
// `app` and describes the first flag or command word that does not exist.
// nullopt when every word is known (the error is of another kind, e.g. a
// missing or malformed value: CLI11's own message says that best).
std::optional<std::string> DescribeUnknownArgument(const CLI::App& app,
                                                   const std::vector<std::string>& args, Lang lang);

// A parse error of another kind (a missing flag, a value that does not
// convert or is out of range, a missing value, extra words), in `lang`:
// the flag and the value named, CLI11's English only where it says
// something the catalog has no text for; then where to read the help of the
// (sub)command parsed last.
std::string DescribeParseError(const CLI::App& app, const CLI::ParseError& e, Lang lang);

// The nearest of `candidates` to `word` by edit distance, if it is close
// enough to be a likely typo (leading dashes aside: at most 1 edit for words
// of up to 4 characters,
// 2 up to 8, 3 beyond); ties go to the earlier candidate.
std::optional<std::string> NearestWord(const std::string& word,
                                       const std::vector<std::string>& candidates);

}  // namespace lathe::cmd
