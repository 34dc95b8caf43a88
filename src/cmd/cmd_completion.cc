// lathe completion bash|zsh|fish: a shell's completion for lathe, and
// lathe __complete WORDS... (internal), what the shell asks it for.
//
// The scripts are small shims that hand the words typed so far to
// `lathe __complete`, which answers from the binary's own command line (every
// command, subcommand and option, so a new one completes without a new
// script) and, for a run, an image, a deployment or a model, from the daemon:
// its ids and names the caller may see. No daemon, no such names; never an
// error on the terminal. CLI11 writes no completion of its own, and a script
// per shell listing the commands by hand would drift from them.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cmd/commands.h"
#include "cmd/output.h"
#include "lathe/api/client.h"
#include "lathe/net/http.h"

namespace lathe::cmd {
namespace {

constexpr char kBash[] = R"(# lathe's completion for bash: source <(lathe completion bash)
_lathe() {
  local IFS=$'\n'
  COMPREPLY=($(lathe __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _lathe lathe
)";

constexpr char kZsh[] = R"(#compdef lathe
# lathe's completion for zsh: source <(lathe completion zsh)
_lathe() {
  local -a found
  found=("${(@f)$(lathe __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  compadd -a found
}
compdef _lathe lathe
)";

constexpr char kFish[] = R"(# lathe's completion for fish: lathe completion fish | source
complete -c lathe -f -a '(lathe __complete (commandline -opc)[2..-1] (commandline -ct))'
)";

// What a positional names, by its option name and the command it is in.
enum class Names { kNone, kRun, kImage, kDeployment, kModel };

Names NamesOf(const CLI::App* cmd, const std::string& positional) {
  const std::string parent = cmd->get_parent() ? cmd->get_parent()->get_name() : "";
  if (positional == "run" || positional == "runs" || positional == "ref") return Names::kRun;
  if (parent == "image" && positional == "name") return Names::kImage;
  if (parent == "deploy" && positional == "name") return Names::kDeployment;
  if (parent == "model" &&
      (positional == "model" || positional == "version" || positional == "name")) {
    return Names::kModel;
  }
  return Names::kNone;
}

// The names of `what` the daemon lets the caller see; none without a daemon.
std::vector<std::string> DaemonNames(Names what) {
  std::vector<std::string> out;
  auto c = api::ApiClient::Connect();
  if (!c.ok()) return out;
  auto add = [&](const Json& list, const char* id, const char* name) {
    for (const auto& x : list) {
      // Another user's run is listed to everyone (redacted): not the caller's to name.
      if (!x.is_object() || x.value("redacted", false)) continue;
      if (id && !x.value(id, "").empty()) out.push_back(x.value(id, ""));
      // A model or deployment of another user's is named OWNER/NAME (its ref).
      const char* key = x.contains("shared") && x.contains("ref") ? "ref" : name;
      if (key && !x.value(key, "").empty()) out.push_back(x.value(key, ""));
    }
  };
  if (what == Names::kRun) {
    if (auto r = (*c)->Get("/api/v1/runs?limit=200&recent=86400"); r.ok()) {
      add(r->value("runs", Json::array()), "id", "name");
    }
  } else if (what == Names::kImage) {
    if (auto r = (*c)->Get("/api/v1/images"); r.ok())
      add(r->value("images", Json::array()), nullptr, "name");
  } else if (what == Names::kDeployment) {
    if (auto r = (*c)->Get("/api/v1/deployments"); r.ok()) {
      add(r->value("deployments", Json::array()), nullptr, "name");
    }
  } else if (what == Names::kModel) {
    if (auto r = (*c)->Get("/api/v1/models"); r.ok())
      add(r->value("models", Json::array()), nullptr, "name");
  }
  return out;
}

// The candidates for the last of `words` (what is being typed), after the
// ones before it.
std::vector<std::string> Candidates(CLI::App& app, const std::vector<std::string>& words) {
  const std::string typed = words.empty() ? "" : words.back();
  CLI::App* cmd = &app;
  size_t positionals = 0;
  for (size_t i = 0; i + 1 < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "--") return {};  // a program's own words
    if (!w.empty() && w[0] == '-') {
      // An option that takes a value skips it.
      const CLI::Option* o = nullptr;
      try {
        o = cmd->get_option_no_throw(w.substr(0, w.find('=')));
      } catch (...) {
      }
      if (o && o->get_type_size() != 0 && w.find('=') == std::string::npos) ++i;
      continue;
    }
    CLI::App* sub = nullptr;
    for (CLI::App* s : cmd->get_subcommands([](CLI::App*) { return true; })) {
      if (s->get_name() == w && !s->get_group().empty()) sub = s;
    }
    if (sub) {
      cmd = sub;
      positionals = 0;
    } else {
      ++positionals;
    }
  }
  std::set<std::string> out;
  if (!typed.empty() && typed[0] == '-') {
    for (const CLI::Option* o : cmd->get_options()) {
      for (const auto& l : o->get_lnames()) out.insert("--" + l);
    }
  } else {
    for (CLI::App* s : cmd->get_subcommands([](CLI::App*) { return true; })) {
      if (!s->get_group().empty()) out.insert(s->get_name());
    }
    // The positional now being typed (one that takes several takes the rest):
    // the daemon's names of what it names.
    size_t k = 0;
    for (const CLI::Option* o : cmd->get_options()) {
      if (!o->get_positional()) continue;
      const bool many = o->get_items_expected_max() > 1;
      if (k == positionals || (many && k < positionals)) {
        const Names what = NamesOf(cmd, o->get_name());
        if (what != Names::kNone) {
          for (auto& name : DaemonNames(what)) out.insert(std::move(name));
        }
        break;
      }
      ++k;
    }
  }
  std::vector<std::string> matching;
  for (const auto& c : out) {
    if (c.compare(0, typed.size(), typed) == 0) matching.push_back(c);
  }
  return matching;
}

}  // namespace

int CompleteMain(int argc, char** argv) {
  CLI::App app;
  Globals g;
  Status status;
  app.add_option("--lang", g.lang);
  SetupAll(app, g, status);
  std::vector<std::string> words(argv + 2, argv + argc);
  if (words.empty()) words.push_back("");
  for (const auto& c : Candidates(app, words)) std::printf("%s\n", c.c_str());
  return 0;
}

void SetupCompletion(CLI::App& app, Globals& g, Status& status) {
  static std::string shell;
  auto* c = app.add_subcommand("completion");
  c->add_option("shell", shell)->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
  c->callback([&status, &g] {
    (void)g;
    std::fputs(shell == "bash" ? kBash : shell == "zsh" ? kZsh : kFish, stdout);
    status = Status::OK();
  });
}

}  // namespace lathe::cmd
