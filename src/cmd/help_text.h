// --help in the reader's language. The commands' and flags' descriptions
// live in the message catalog (data/messages_help.yaml), not in the Setup
// functions: LocalizeHelp fills them in once the command tree is built.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "lathe/common/i18n.h"

namespace lathe::cmd {

// The language --help and parse errors are written in, read before parsing:
// a --lang flag anywhere before `--` (main's or a subcommand's), else the
// environment (DetectLang).
Lang HelpLanguage(const std::vector<std::string>& args);

// Sets the description of every visible command and flag of `app` from the
// catalog, in `lang`: help.<path> for a command (help.lathe for the top
// level, help.snap.create for `lathe snap create`), help.<path>.<flag> for a
// flag or argument (the flag's first long name without dashes, else its
// short name, else the argument's name), then the same flag of each parent
// command (help.snap.store for `lathe snap ls --store`), then
// help.flag.<flag>. Installs a formatter whose layout words (Usage, OPTIONS,
// argument names and value types) come from the catalog too. Call it after
// every Setup function, before parsing.
void LocalizeHelp(CLI::App& app, Lang lang);

}  // namespace lathe::cmd
