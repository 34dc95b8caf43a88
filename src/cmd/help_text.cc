#include "cmd/help_text.h"

#include <memory>

#include "cmd/output.h"

namespace lathe::cmd {
namespace {

std::string OptionKey(const CLI::Option* o) {
  if (!o->get_lnames().empty()) return o->get_lnames().front();
  if (!o->get_snames().empty()) return o->get_snames().front();
  return o->get_name();
}

// The catalog id of an option's text, or nullopt. `paths` are the command's
// path and its parents' ("snap.ls", "snap").
std::optional<std::string> OptionTextId(const std::vector<std::string>& paths,
                                        const std::string& key) {
  for (const auto& p : paths) {
    std::string id = "help." + p + "." + key;
    if (Catalog::Default().Has(id)) return id;
  }
  std::string id = "help.flag." + key;
  if (Catalog::Default().Has(id)) return id;
  return std::nullopt;
}

// Calls fn(app, paths) for `app` and every visible subcommand below it.
template <typename Fn>
void Walk(CLI::App* app, std::vector<std::string> paths, const Fn& fn) {
  fn(app, paths);
  for (CLI::App* sub : app->get_subcommands([](CLI::App* s) { return !s->get_group().empty(); })) {
    std::vector<std::string> sub_paths = {
        app->get_parent() == nullptr ? sub->get_name() : paths.front() + "." + sub->get_name()};
    if (app->get_parent() != nullptr) sub_paths.insert(sub_paths.end(), paths.begin(), paths.end());
    Walk(sub, sub_paths, fn);
  }
}

// CLI11's format_help, with columns counted on the screen (a CJK
// character takes two), not in bytes.
std::string FormatHelp(const std::string& name, const std::string& description, size_t width) {
  std::string out = "  " + name;
  size_t w = DisplayWidth(out);
  if (description.empty()) return out + "\n";
  if (w >= width) {
    out += "\n" + std::string(width, ' ');
  } else {
    out += std::string(width - w, ' ');
  }
  for (char c : description) {
    out += c;
    if (c == '\n') out += std::string(width, ' ');
  }
  return out + "\n";
}

// CLI11's layout with the catalog's words.
class CatalogFormatter : public CLI::Formatter {
 public:
  explicit CatalogFormatter(Lang lang) : lang_(lang) {
    label("Usage", Tr("help.label.usage", lang));
    label("OPTIONS", Tr("help.label.options", lang));
    label("SUBCOMMAND", Tr("help.label.command", lang));
    label("SUBCOMMANDS", Tr("help.label.commands", lang));
    label("Positionals", Tr("help.label.positionals", lang));
    label("REQUIRED", Tr("help.label.required", lang));
    label("Env", Tr("help.label.env", lang));
  }

  std::string make_option(const CLI::Option* opt, bool is_positional) const override {
    return FormatHelp(make_option_name(opt, is_positional) + make_option_opts(opt),
                      make_option_desc(opt), column_width_);
  }

  std::string make_subcommand(const CLI::App* sub) const override {
    return FormatHelp(sub->get_display_name(true), sub->get_description(), column_width_);
  }

  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    if (!is_positional) return CLI::Formatter::make_option_name(opt, false);
    return ArgName(opt);
  }

  std::string make_option_usage(const CLI::Option* opt) const override {
    std::string out = ArgName(opt);
    if (opt->get_expected_max() >= CLI::detail::expected_max_vector_size) out += "...";
    return opt->get_required() ? out : "[" + out + "]";
  }

  // The value's type, "REQUIRED" and the environment variable; CLI11's
  // validator descriptions ("INT in [1 - 50]") are left out: each flag's
  // text says what it accepts.
  std::string make_option_opts(const CLI::Option* opt) const override {
    std::string out;
    if (opt->get_type_size() != 0) {
      std::string type = opt->get_type_name();
      type = type.substr(0, type.find(':'));
      if (!type.empty()) out += " " + TypeName(type);
      if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) out += " ...";
      if (opt->get_required()) out += " " + get_label("REQUIRED");
    }
    if (!opt->get_envname().empty()) {
      out += " (" + get_label("Env") + ":" + opt->get_envname() + ")";
    }
    return out;
  }

 private:
  std::string ArgName(const CLI::Option* opt) const {
    std::string id = "help.arg." + opt->get_name();
    return Catalog::Default().Has(id) ? Tr(id, lang_) : opt->get_name();
  }

  std::string TypeName(const std::string& type) const {
    if (type == "TEXT") return Tr("help.type.text", lang_);
    if (type == "INT" || type == "UINT") return Tr("help.type.int", lang_);
    if (type == "FLOAT") return Tr("help.type.number", lang_);
    return type;
  }

  Lang lang_;
};

}  // namespace

Lang HelpLanguage(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    std::optional<std::string> value;
    if (a == "--lang" && i + 1 < args.size()) value = args[i + 1];
    if (a.rfind("--lang=", 0) == 0) value = a.substr(7);
    if (value && ParseLang(*value)) return DetectLang(*value);
  }
  return DetectLang();
}

void LocalizeHelp(CLI::App& app, Lang lang) {
  app.formatter(std::make_shared<CatalogFormatter>(lang));
  const std::string options_group = Tr("help.group.options", lang);
  const std::string commands_group = Tr("help.group.commands", lang);
  Walk(&app, {"lathe"}, [&](CLI::App* a, const std::vector<std::string>& paths) {
    a->formatter(app.get_formatter());
    if (Catalog::Default().Has("help." + paths.front())) {
      a->description(Tr("help." + paths.front(), lang));
    }
    if (a->get_parent() != nullptr) a->group(commands_group);
    for (CLI::Option* o : a->get_options([](CLI::Option*) { return true; })) {
      std::optional<std::string> id;
      if (o == a->get_help_ptr()) {
        id = "help.flag.help";
      } else if (a->get_parent() == nullptr && o->check_lname("version")) {
        id = "help.flag.version";
      } else {
        id = OptionTextId(paths, OptionKey(o));
      }
      if (id) o->description(Tr(*id, lang));
      if (o->get_group() == "Options") o->group(options_group);
    }
  });
}

}  // namespace lathe::cmd
