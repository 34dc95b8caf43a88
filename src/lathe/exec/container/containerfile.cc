#include "lathe/exec/container/containerfile.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

namespace lathe::exec {
namespace {

// One instruction: its words (split at blanks) and the line it starts on.
struct Instruction {
  std::vector<std::string> words;
  int line = 0;
};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i > start) out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// The `# escape=X` parser directive, which must come before anything else.
char EscapeOf(const std::vector<std::string>& lines) {
  for (const auto& raw : lines) {
    std::string l = Trim(raw);
    if (l.empty() || l[0] != '#') return '\\';
    std::string d = Lower(Trim(l.substr(1)));
    if (d.starts_with("escape=")) {
      std::string v = Trim(d.substr(7));
      if (v == "`") return '`';
      return '\\';
    }
    if (d.find('=') == std::string::npos) return '\\';  // a comment ends the directives
  }
  return '\\';
}

std::vector<Instruction> Instructions(std::string_view text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string l(text.substr(pos, nl - pos));
    if (!l.empty() && l.back() == '\r') l.pop_back();
    lines.push_back(std::move(l));
    pos = nl + 1;
  }
  const char escape = EscapeOf(lines);
  std::vector<Instruction> out;
  std::string cur;
  int start = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string l = Trim(lines[i]);
    if (l.empty() || l[0] == '#') continue;  // also inside a continuation, as buildah does
    if (cur.empty()) start = static_cast<int>(i) + 1;
    if (l.back() == escape) {
      cur += l.substr(0, l.size() - 1) + " ";
      continue;
    }
    cur += l;
    out.push_back({Words(cur), start});
    cur.clear();
  }
  if (!cur.empty()) out.push_back({Words(cur), start});
  return out;
}

// `ref` with $NAME and ${NAME} replaced from `args`; false when one has no value.
bool Substitute(std::string& ref, const std::map<std::string, std::string>& args) {
  std::string out;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (ref[i] != '$') {
      out.push_back(ref[i]);
      continue;
    }
    std::string name;
    if (i + 1 < ref.size() && ref[i + 1] == '{') {
      size_t close = ref.find('}', i + 2);
      if (close == std::string::npos) return false;
      name = ref.substr(i + 2, close - i - 2);
      i = close;
    } else {
      size_t j = i + 1;
      while (j < ref.size() &&
             (std::isalnum(static_cast<unsigned char>(ref[j])) || ref[j] == '_')) {
        ++j;
      }
      name = ref.substr(i + 1, j - i - 1);
      i = j - 1;
    }
    auto it = args.find(name);
    if (name.empty() || it == args.end() || it->second.empty()) return false;
    out += it->second;
  }
  ref = out;
  return true;
}

Status BadFrom(int line) {
  return Status::Msg(Code::kInvalidArgument, "image.build_bad_from",
                     {{"line", std::to_string(line)}});
}

}  // namespace

Result<std::vector<BaseImage>> ContainerfileBases(std::string_view text) {
  std::vector<BaseImage> out;
  std::set<std::string> stages, seen;
  std::map<std::string, std::string> global_args;
  bool any_from = false;
  auto add = [&](std::string ref, int line) -> Status {
    if (!Substitute(ref, global_args) || ref.empty()) return BadFrom(line);
    if (Lower(ref) == "scratch" || stages.count(Lower(ref)) || seen.count(ref)) return Status::OK();
    seen.insert(ref);
    out.push_back({ref, line});
    return Status::OK();
  };
  for (const Instruction& in : Instructions(text)) {
    if (in.words.empty()) continue;
    const std::string op = Lower(in.words[0]);
    if (op == "arg" && !any_from) {
      for (size_t i = 1; i < in.words.size(); ++i) {
        const std::string& w = in.words[i];
        size_t eq = w.find('=');
        std::string v = eq == std::string::npos ? "" : w.substr(eq + 1);
        if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
          v = v.substr(1, v.size() - 2);
        }
        global_args[w.substr(0, eq)] = v;
      }
    } else if (op == "from") {
      any_from = true;
      size_t i = 1;
      while (i < in.words.size() && in.words[i].starts_with("--")) ++i;
      if (i >= in.words.size()) return BadFrom(in.line);
      RETURN_IF_ERROR(add(in.words[i], in.line));
      if (i + 2 < in.words.size() && Lower(in.words[i + 1]) == "as") {
        stages.insert(Lower(in.words[i + 2]));
      }
    } else if (op == "copy" || op == "add") {
      for (size_t i = 1; i < in.words.size() && in.words[i].starts_with("--"); ++i) {
        const std::string& w = in.words[i];
        if (!Lower(w).starts_with("--from=")) continue;
        std::string from = w.substr(7);
        bool index = !from.empty() && std::all_of(from.begin(), from.end(),
                                                  [](unsigned char c) { return std::isdigit(c); });
        if (!index) RETURN_IF_ERROR(add(from, in.line));
      }
    }
  }
  return out;
}

}  // namespace lathe::exec
