#include "cmd/usage_error.h"

#include <re2/re2.h>

#include <algorithm>

#include "lathe/doctor/text_match.h"

namespace lathe::cmd {
namespace {

// "lathe snap ls" for a subcommand, "lathe" for the top level.
std::string CommandPath(const CLI::App* app) {
  std::string path;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent()) {
    path = a->get_parent() == nullptr ? "lathe" + path : " " + a->get_name() + path;
  }
  return path;
}

// The visible subcommand of `app` named `word`, or nullptr.
const CLI::App* FindSubcommand(const CLI::App* app, const std::string& word) {
  auto subs = app->get_subcommands([&](const CLI::App* s) { return s->check_name(word); });
  return subs.empty() ? nullptr : subs.front();
}

std::vector<std::string> SubcommandNames(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* s :
       app->get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); })) {
    names.push_back(s->get_name());
  }
  return names;
}

std::vector<std::string> FlagNames(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::Option* o :
       app->get_options([](const CLI::Option* o) { return o->nonpositional(); })) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
    for (const auto& s : o->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// The option a flag word names in `app`: "--gpus", "--gpus=2", "-a"; a group
// of short flags ("-ft") names each of its letters.
bool KnownFlag(const CLI::App* app, const std::string& word, const CLI::Option** opt) {
  std::string name = word.substr(0, word.find('='));
  *opt = app->get_option_no_throw(name);
  if (*opt != nullptr) return true;
  if (name.size() > 2 && name[1] != '-') {
    for (size_t i = 1; i < name.size(); ++i) {
      if (app->get_option_no_throw(std::string{'-', name[i]}) == nullptr) return false;
    }
    return true;
  }
  return false;
}

// True for an option that takes the next word as its value (a flag's type
// size is 1 in CLI11 2.1; its expected count is 0).
bool TakesValue(const CLI::Option* opt, const std::string& word) {
  if (opt == nullptr || opt->get_type_size_max() == 0 || opt->get_expected_max() == 0) {
    return false;
  }
  return word.rfind("--", 0) == 0 ? word.find('=') == std::string::npos : word.size() == 2;
}

// The positional that takes a whole command (`lathe run … -- CMD ARGS`).
bool TakesCommand(const CLI::App* app) {
  return !app->get_options([](const CLI::Option* o) { return o->get_name() == "command"; }).empty();
}

std::string Join(const std::vector<std::string>& words, size_t from, size_t to) {
  std::string out;
  for (size_t i = from; i < to; ++i) out += (out.empty() ? "" : " ") + words[i];
  return out;
}

std::string WithHint(std::string text, const std::optional<std::string>& nearest, Lang lang) {
  if (nearest) text += Tr("cli.did_you_mean", lang, {{"word", *nearest}});
  return text;
}

}  // namespace

namespace {

std::string ParseErrorText(const CLI::ParseError& e, Lang lang) {
  const std::string what = e.what();
  const std::string kind = e.get_name();
  std::string option, value, a, b;
  if (kind == "RequiredError" && RE2::FullMatch(what, "(\\S+) is required", &option)) {
    return Tr("cli.required", lang, {{"option", option}});
  }
  if (kind == "ConversionError" &&
      (RE2::FullMatch(what, "The value (.*) is not an allowed value for (\\S+)", &value, &option) ||
       RE2::FullMatch(what, "Could not convert: (\\S+) = (.*)", &option, &value))) {
    return Tr("cli.bad_value", lang, {{"option", option}, {"value", value}});
  }
  if (kind == "ValidationError") {
    if (RE2::FullMatch(what, "(\\S+): Value (.*) not in range (\\S+) to (\\S+)", &option, &value,
                       &a, &b)) {
      return Tr("cli.out_of_range", lang,
                {{"option", option}, {"value", value}, {"min", a}, {"max", b}});
    }
    if (RE2::FullMatch(what, "(\\S+): (.*) not in (\\{.*\\})", &option, &value, &a)) {
      return Tr("cli.not_one_of", lang, {{"option", option}, {"value", value}, {"allowed", a}});
    }
  }
  if (kind == "ArgumentMismatch" &&
      RE2::FullMatch(what, "(\\S+): \\d+ required .* missing", &option)) {
    return Tr("cli.missing_value", lang, {{"option", option}});
  }
  if (kind == "ArgumentMismatch" &&
      RE2::FullMatch(what, "(\\S+): At Most (\\d+) required but received (\\d+)", &option, &a,
                     &b)) {
    return Tr("cli.too_many_values", lang, {{"option", option}, {"max", a}, {"count", b}});
  }
  if (kind == "ArgumentMismatch" &&
      (RE2::FullMatch(what, "(\\S+): At least (\\d+) required but received (\\d+)", &option, &a,
                      &b) ||
       RE2::FullMatch(what, "Expected (?:exactly|at least) (\\d+) arguments to (\\S+), got (\\d+)",
                      &a, &option, &b))) {
    return Tr("cli.too_few_values", lang, {{"option", option}, {"min", a}, {"count", b}});
  }
  if (kind == "ExcludesError" && RE2::FullMatch(what, "(\\S+) excludes (\\S+)", &option, &a)) {
    return Tr("cli.excludes", lang, {{"option", option}, {"other", a}});
  }
  if (kind == "RequiresError" && RE2::FullMatch(what, "(\\S+) requires (\\S+)", &option, &a)) {
    return Tr("cli.requires", lang, {{"option", option}, {"other", a}});
  }
  if (kind == "RequiredError" && RE2::FullMatch(what, "At least 1 option from \\[(.*)\\]", &a)) {
    return Tr("cli.one_option_of", lang, {{"options", a}});
  }
  if (kind == "ExtrasError" &&
      RE2::FullMatch(what, "The following arguments? (?:was|were) not expected: (.*)", &value)) {
    return Tr("cli.unexpected", lang, {{"words", value}});
  }
  return Tr("cli.usage", lang, {{"detail", what}});
}

}  // namespace

std::string DescribeParseError(const CLI::App& app, const CLI::ParseError& e, Lang lang) {
  const CLI::App* cur = &app;
  while (!cur->get_subcommands().empty()) cur = cur->get_subcommands().front();
  return ParseErrorText(e, lang) + "\n" + Tr("cli.see_help", lang, {{"command", CommandPath(cur)}});
}

std::optional<std::string> NearestWord(const std::string& word,
                                       const std::vector<std::string>& candidates) {
  // Flags are compared without their dashes: "--bar" is not near "--max".
  auto bare = [](const std::string& s) {
    return doctor::DecodeUtf8(s.substr(std::min(s.find_first_not_of('-'), s.size())));
  };
  std::u32string w = bare(word);
  size_t limit = w.size() <= 4 ? 1 : w.size() <= 8 ? 2 : 3;
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (const auto& c : candidates) {
    size_t d = doctor::EditDistance(w, bare(c), limit);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::optional<std::string> DescribeUnknownArgument(const CLI::App& app,
                                                   const std::vector<std::string>& args,
                                                   Lang lang) {
  const CLI::App* cur = &app;
  size_t cmd_start = 0;              // where the current subcommand's words begin
  std::optional<size_t> first_word;  // the first positional word of the current subcommand
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return std::nullopt;  // the rest is a command's own
    if (a.size() > 1 && a[0] == '-') {
      const CLI::Option* opt = nullptr;
      if (KnownFlag(cur, a, &opt)) {
        if (TakesValue(opt, a)) ++i;
        continue;
      }
      std::string flag = a.substr(0, a.find('='));
      std::string path = CommandPath(cur);
      std::string text = Tr("cli.unknown_flag", lang, {{"command", path}, {"flag", flag}});
      if (first_word && TakesCommand(cur)) {
        // `lathe run python3 train.py --steps 10`: the flag is the command's.
        std::string example = Join(args, cmd_start, *first_word);
        example = path + (example.empty() ? "" : " " + example) + " -- " +
                  Join(args, *first_word, args.size());
        return text + "\n" +
               Tr("cli.flag_after_command", lang, {{"flag", flag}, {"example", example}});
      }
      text = WithHint(text, NearestWord(flag, FlagNames(cur)), lang);
      return text + "\n" + Tr("cli.see_help", lang, {{"command", path}});
    }
    if (const CLI::App* sub = FindSubcommand(cur, a); sub != nullptr && !first_word) {
      cur = sub;
      cmd_start = i + 1;
      continue;
    }
    if (!first_word && !SubcommandNames(cur).empty() &&
        cur->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty()) {
      std::string path = CommandPath(cur);
      std::string text = Tr("cli.unknown_command", lang, {{"command", path}, {"word", a}});
      text = WithHint(text, NearestWord(a, SubcommandNames(cur)), lang);
      return text + "\n" + Tr("cli.see_help", lang, {{"command", path}});
    }
    if (!first_word) first_word = i;
  }
  if (cur->get_require_subcommand_min() > 0 && !first_word) {
    std::string path = CommandPath(cur);
    return Tr("cli.no_command", lang, {{"command", path}}) + "\n" +
           Tr("cli.see_help", lang, {{"command", path}});
  }
  return std::nullopt;
}

}  // namespace lathe::cmd
