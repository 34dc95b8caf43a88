#include "lathe/common/i18n.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "lathe/common/embedded.h"

namespace lathe {

std::optional<Lang> ParseLang(std::string_view s) {
  if (s.size() >= 2 && (s.substr(0, 2) == "zh" || s.substr(0, 2) == "ZH")) return Lang::kZh;
  if (s.size() >= 2 && (s.substr(0, 2) == "en" || s.substr(0, 2) == "EN")) return Lang::kEn;
  if (s == "C" || s == "POSIX" || s.substr(0, 2) == "C.") return Lang::kEn;
  if (s == "pseudo") return Lang::kPseudo;
  return std::nullopt;
}

std::string_view LangName(Lang lang) {
  switch (lang) {
    case Lang::kZh:
      return "zh";
    case Lang::kPseudo:
      return "pseudo";
    case Lang::kEn:
      break;
  }
  return "en";
}

std::string PseudoText(std::string_view en) { return "⟦" + std::string(en) + "⟧"; }

std::string PickText(const std::string& en, const std::string& zh, Lang lang) {
  switch (lang) {
    case Lang::kZh:
      return zh;
    case Lang::kPseudo:
      return PseudoText(en);
    case Lang::kEn:
      break;
  }
  return en;
}

Lang DetectLang(std::optional<std::string_view> flag, GetenvFn getenv_fn) {
  if (flag && !flag->empty()) {
    if (auto l = ParseLang(*flag)) return *l;
  }
  for (const char* var : {"LATHE_LANG", "LC_ALL", "LC_MESSAGES", "LANG"}) {
    const char* v = getenv_fn(var);
    if (v == nullptr || *v == '\0') continue;
    // The first variable that is set decides, as POSIX locale lookup does.
    return ParseLang(v).value_or(Lang::kEn);
  }
  return Lang::kEn;
}

Lang DetectLang(std::optional<std::string_view> flag) {
  return DetectLang(flag, [](const char* n) -> const char* { return std::getenv(n); });
}

namespace {

Status EntryError(std::string_view file, std::string_view id, std::string_view field,
                  std::string_view what) {
  return Status::InvalidArgument(
      fmt::format("{}: entry '{}' field '{}': {}", file, id, field, what));
}

bool IsBiMap(const YAML::Node& n) { return n.IsMap() && (n["en"] || n["zh"]) && n.size() <= 2; }

Result<BiText> ParseBiText(const YAML::Node& n, std::string_view file, std::string_view id,
                           std::string_view field) {
  BiText t;
  if (!n["en"] || !n["en"].IsScalar() || n["en"].Scalar().empty()) {
    return EntryError(file, id, field, "missing English text (en)");
  }
  if (!n["zh"] || !n["zh"].IsScalar() || n["zh"].Scalar().empty()) {
    return EntryError(file, id, field, "missing Chinese text (zh)");
  }
  t.en = n["en"].Scalar();
  t.zh = n["zh"].Scalar();
  return t;
}

Status ParseField(const std::string& key, const YAML::Node& v, std::string_view file,
                  DataEntry& e) {
  if (v.IsScalar()) {
    e.plain[key] = v.Scalar();
  } else if (IsBiMap(v)) {
    ASSIGN_OR_RETURN(e.text[key], ParseBiText(v, file, e.id, key));
  } else if (v.IsSequence()) {
    for (const auto& item : v) {
      if (item.IsScalar()) {
        e.lists[key].push_back(item.Scalar());
      } else if (IsBiMap(item)) {
        ASSIGN_OR_RETURN(BiText t, ParseBiText(item, file, e.id, key));
        e.bilists[key].push_back(std::move(t));
      } else {
        return EntryError(file, e.id, key, "list items must be scalars or {en, zh}");
      }
    }
  } else if (v.IsNull()) {
    e.plain[key] = "";
  } else {
    return EntryError(file, e.id, key, "expected a scalar, a list or {en, zh}");
  }
  return Status::OK();
}

Result<std::vector<DataEntry>> ParseDataNode(const YAML::Node& root, std::string_view file) {
  if (!root.IsSequence()) {
    return Status::InvalidArgument(fmt::format("{}: top level must be a list of entries", file));
  }
  std::vector<DataEntry> out;
  std::set<std::string> seen;
  for (const auto& node : root) {
    if (!node.IsMap() || !node["id"] || !node["id"].IsScalar()) {
      return Status::InvalidArgument(fmt::format("{}: an entry has no 'id'", file));
    }
    DataEntry e;
    e.id = node["id"].Scalar();
    if (!seen.insert(e.id).second) {
      return Status::InvalidArgument(fmt::format("{}: duplicate id '{}'", file, e.id));
    }
    for (const auto& kv : node) {
      std::string key = kv.first.Scalar();
      if (key == "id") continue;
      RETURN_IF_ERROR(ParseField(key, kv.second, file, e));
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

Result<std::vector<DataEntry>> ParseDataFile(std::string_view yaml, std::string_view file_name) {
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return ParseDataNode(root, file_name);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: {}", file_name, e.what()));
  }
}

std::string FillPlaceholders(std::string_view templ, const MsgArgs& args) {
  std::string out;
  out.reserve(templ.size() + 32);
  size_t i = 0;
  while (i < templ.size()) {
    if (templ[i] == '{') {
      size_t close = templ.find('}', i + 1);
      if (close != std::string_view::npos) {
        std::string_view key = templ.substr(i + 1, close - i - 1);
        const MsgArg* found = nullptr;
        for (const auto& a : args) {
          if (a.key == key) found = &a;
        }
        if (found != nullptr) {
          out += found->value;
          i = close + 1;
          continue;
        }
      }
    }
    out += templ[i++];
  }
  return out;
}

struct Catalog::LazyState {
  std::vector<std::string_view> yaml;  // per entry: its "- id: ..." block
  std::vector<std::string_view> file;  // per entry: its file, for messages
  std::mutex mu;
  std::vector<std::unique_ptr<DataEntry>> parsed;  // guarded by mu
  bool all_parsed = false;                         // guarded by mu
};

Catalog::Catalog() = default;
Catalog::~Catalog() = default;
Catalog::Catalog(Catalog&&) noexcept = default;
Catalog& Catalog::operator=(Catalog&&) noexcept = default;

Result<Catalog> Catalog::FromYaml(std::string_view yaml, std::string_view file_name) {
  ASSIGN_OR_RETURN(std::vector<DataEntry> entries, ParseDataFile(yaml, file_name));
  Catalog c;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].text.count("text")) {
      return Status::InvalidArgument(
          fmt::format("{}: entry '{}' has no 'text'", file_name, entries[i].id));
    }
    c.index_.emplace(entries[i].id, i);
    c.ids_.push_back(entries[i].id);
  }
  c.entries_ = std::move(entries);
  return c;
}

namespace {
bool IsMessagesFile(std::string_view n) {
  return n.substr(0, 8) == "messages" && n.size() >= 5 && n.substr(n.size() - 5) == ".yaml";
}
}  // namespace

Result<Catalog> Catalog::FromEmbedded() {
  Catalog all;
  for (const auto& f : EmbeddedFiles()) {
    std::string_view n = f.name;
    if (!IsMessagesFile(n)) continue;
    ASSIGN_OR_RETURN(Catalog c, FromYaml(f.text, "data/" + std::string(n)));
    for (auto& e : c.entries_) {
      if (all.index_.count(e.id)) {
        return Status::InvalidArgument(
            fmt::format("data/{}: id '{}' is also defined in another "
                        "messages*.yaml file",
                        n, e.id));
      }
      all.index_.emplace(e.id, all.entries_.size());
      all.ids_.push_back(e.id);
      all.entries_.push_back(std::move(e));
    }
  }
  return all;
}

// Splits each file at the lines that begin an entry ("- id: x"). Written by
// hand because it is the point: finding the ids without a YAML parse. The
// messages files keep every entry at column 0 (the catalog tests parse them
// whole and compare with this index, so a file that breaks the shape fails
// there first).
Catalog Catalog::Lazy() {
  Catalog c;
  c.lazy_ = std::make_unique<LazyState>();
  for (const auto& f : EmbeddedFiles()) {
    if (!IsMessagesFile(f.name)) continue;
    std::string_view text = f.text;
    size_t pos = 0, start = std::string_view::npos;
    std::string id;
    auto close = [&](size_t end) {
      if (start == std::string_view::npos || id.empty()) return;
      if (!c.index_.emplace(id, c.ids_.size()).second) return;
      c.ids_.push_back(id);
      c.lazy_->yaml.push_back(text.substr(start, end - start));
      c.lazy_->file.push_back(f.name);
    };
    while (pos < text.size()) {
      size_t eol = text.find('\n', pos);
      if (eol == std::string_view::npos) eol = text.size();
      std::string_view line = text.substr(pos, eol - pos);
      if (line.substr(0, 6) == "- id: ") {
        close(pos);
        start = pos;
        std::string_view v = line.substr(6);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\r')) v.remove_suffix(1);
        if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
          v = v.substr(1, v.size() - 2);
        }
        id = std::string(v);
      }
      pos = eol + 1;
    }
    close(text.size());
  }
  c.lazy_->parsed.resize(c.ids_.size());
  return c;
}

const Catalog& Catalog::Default() {
  static const Catalog* catalog = new Catalog(Lazy());
  return *catalog;
}

const DataEntry* Catalog::Find(std::string_view id) const {
  auto it = index_.find(id);
  if (it == index_.end()) return nullptr;
  if (!lazy_) return &entries_[it->second];
  std::lock_guard<std::mutex> lock(lazy_->mu);
  auto& slot = lazy_->parsed[it->second];
  if (!slot) {
    auto parsed = ParseDataFile(lazy_->yaml[it->second], lazy_->file[it->second]);
    if (!parsed.ok() || parsed->size() != 1 || !(*parsed)[0].text.count("text")) return nullptr;
    slot = std::make_unique<DataEntry>(std::move((*parsed)[0]));
  }
  return slot.get();
}

const std::vector<DataEntry>& Catalog::entries() const {
  if (!lazy_) return entries_;
  {
    std::lock_guard<std::mutex> lock(lazy_->mu);
    if (lazy_->all_parsed) return entries_;
  }
  std::vector<DataEntry> all;
  all.reserve(ids_.size());
  for (const auto& id : ids_) {
    if (const DataEntry* e = Find(id)) all.push_back(*e);
  }
  std::lock_guard<std::mutex> lock(lazy_->mu);
  if (!lazy_->all_parsed) {
    entries_ = std::move(all);
    lazy_->all_parsed = true;
  }
  return entries_;
}

bool Catalog::Has(std::string_view id) const { return index_.find(id) != index_.end(); }

std::string Catalog::Format(std::string_view id, Lang lang, const MsgArgs& args) const {
  const DataEntry* e = Find(id);
  if (e == nullptr) {
    std::string out(id);
    for (const auto& a : args) out += fmt::format(" {}={}", a.key, a.value);
    return out;
  }
  const BiText& t = e->text.at("text");
  if (lang == Lang::kPseudo) return FillPlaceholders(t.Get(lang), args);
  return FillPlaceholders(lang == Lang::kZh ? t.zh : t.en, args);  // no copy of the template
}

std::string Tr(std::string_view id, Lang lang, const MsgArgs& args) {
  return Catalog::Default().Format(id, lang, args);
}

std::string Localize(const Status& s, Lang lang) {
  if (!s.msg_id().empty() && Catalog::Default().Has(s.msg_id())) {
    return Catalog::Default().Format(s.msg_id(), lang, s.args());
  }
  return s.message();
}

}  // namespace lathe
