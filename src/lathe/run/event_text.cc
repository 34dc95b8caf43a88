#include "lathe/run/event_text.h"

#include <re2/re2.h>

#include <memory>
#include <vector>

namespace lathe::run {
namespace {

// Arguments that carry another message (a Status's text, a nested reason),
// read back against the catalog in their turn.
bool IsNestedArg(std::string_view key) {
  return key == "reason" || key == "detail" || key == "why";
}

constexpr size_t kMinLiteralChars = 6;  // for a search of the whole catalog
constexpr int kMaxDepth = 3;            // nested messages read back

// One catalog entry's English text as a pattern: its placeholders become
// lazy groups, the rest matches itself.
struct Template {
  std::string id;
  std::unique_ptr<RE2> re;
  std::vector<std::string> names;
  size_t literal_chars = 0;
};

// The entries whose id starts with `prefix`, parsed and compiled only now:
// rendering a run's events needs the event.* texts, rarely the rest.
std::vector<Template> Compile(const Catalog& catalog, std::string_view prefix) {
  std::vector<Template> out;
  for (const std::string& id : catalog.ids()) {
    if (id.compare(0, prefix.size(), prefix) != 0) continue;
    const DataEntry* found = catalog.Find(id);
    if (found == nullptr) continue;
    const DataEntry& e = *found;
    auto it = e.text.find("text");
    if (it == e.text.end()) continue;
    const std::string& en = it->second.en;
    Template t;
    t.id = e.id;
    std::string pattern;
    size_t i = 0;
    while (i < en.size()) {
      size_t open = en.find('{', i);
      size_t close = open == std::string::npos ? open : en.find('}', open + 1);
      if (close == std::string::npos) {
        pattern += RE2::QuoteMeta(en.substr(i));
        t.literal_chars += en.size() - i;
        break;
      }
      pattern += RE2::QuoteMeta(en.substr(i, open - i)) + "(.*?)";
      t.literal_chars += open - i;
      t.names.push_back(en.substr(open + 1, close - open - 1));
      i = close + 1;
    }
    RE2::Options o;
    o.set_dot_nl(true);
    o.set_log_errors(false);
    t.re = std::make_unique<RE2>(pattern, o);
    if (t.re->ok()) out.push_back(std::move(t));
  }
  return out;
}

const std::vector<Template>& Templates(std::string_view prefix) {
  static const std::vector<Template>* events =
      new std::vector<Template>(Compile(Catalog::Default(), "event."));
  if (prefix == "event.") return *events;
  static const std::vector<Template>* all =
      new std::vector<Template>(Compile(Catalog::Default(), ""));
  return *all;
}

std::string Render(std::string_view english, Lang lang, int depth);

// The arguments of a match, nested messages rendered in `lang`.
MsgArgs RenderArgs(MsgArgs args, Lang lang, int depth) {
  for (auto& a : args) {
    if (IsNestedArg(a.key)) a.value = Render(a.value, lang, depth + 1);
  }
  return args;
}

std::optional<std::string> RenderWhole(std::string_view english, Lang lang, int depth) {
  auto m = MatchEnglish(english, "event.");
  if (!m) m = MatchEnglish(english, "");
  if (!m) return std::nullopt;
  return Tr(m->id, lang, RenderArgs(std::move(m->args), lang, depth));
}

// `english` as parts joined by "; ", each a catalog text; nullopt unless
// there are several and each of them matches.
std::optional<std::string> RenderParts(std::string_view english, Lang lang, int depth) {
  if (english.find("; ") == std::string_view::npos) return std::nullopt;
  std::string out;
  size_t start = 0;
  while (true) {
    size_t sep = english.find("; ", start);
    auto part = RenderWhole(english.substr(start, sep - start), lang, depth);
    if (!part) return std::nullopt;
    out += (out.empty() ? "" : lang == Lang::kZh ? "；" : "; ") + *part;
    if (sep == std::string_view::npos) break;
    start = sep + 2;
  }
  return out;
}

// `english` in `lang`: part by part ("a; b") when every part is a catalog
// text (a placeholder of one text could otherwise swallow the others), else
// whole, else as it is.
std::string Render(std::string_view english, Lang lang, int depth) {
  if (depth > kMaxDepth || english.empty()) return std::string(english);
  if (auto parts = RenderParts(english, lang, depth)) return *parts;
  if (auto whole = RenderWhole(english, lang, depth)) return *whole;
  return std::string(english);
}

std::string ArgText(const Json& v, Lang lang, int depth);

// data.msg_id with data.msg_args, in `lang`; nullopt when there is no such
// id, or no msg_args: older events carry a msg_id of another meaning (the
// log-lost warning's without its arguments, a skipped snapshot's reason's).
std::optional<std::string> FromMsgId(const Json& obj, Lang lang, int depth) {
  if (!obj.is_object() || !obj.contains("msg_id") || !obj["msg_id"].is_string() ||
      !obj.contains("msg_args") || !obj["msg_args"].is_object()) {
    return std::nullopt;
  }
  const std::string id = obj["msg_id"].get<std::string>();
  if (!Catalog::Default().Has(id)) return std::nullopt;
  MsgArgs args;
  for (const auto& [k, v] : obj["msg_args"].items()) args.push_back({k, ArgText(v, lang, depth)});
  return Tr(id, lang, args);
}

std::string ArgText(const Json& v, Lang lang, int depth) {
  if (v.is_string()) return v.get<std::string>();
  if (depth < kMaxDepth) {
    if (auto nested = FromMsgId(v, lang, depth + 1)) return *nested;
  }
  return v.dump();
}

}  // namespace

std::optional<EnglishMatch> MatchEnglish(std::string_view english, std::string_view id_prefix) {
  const Template* best = nullptr;
  std::vector<std::string> values, best_values;
  for (const Template& t : Templates(id_prefix)) {
    if (t.id.compare(0, id_prefix.size(), id_prefix) != 0) continue;
    if (t.literal_chars == 0 || (id_prefix.empty() && t.literal_chars < kMinLiteralChars)) continue;
    if (best != nullptr && t.literal_chars <= best->literal_chars) continue;
    values.assign(t.names.size(), std::string());
    std::vector<RE2::Arg> args(values.size());
    std::vector<const RE2::Arg*> ptrs(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      args[i] = &values[i];
      ptrs[i] = &args[i];
    }
    if (!RE2::FullMatchN(re2::StringPiece(english.data(), english.size()), *t.re, ptrs.data(),
                         static_cast<int>(ptrs.size()))) {
      continue;
    }
    best = &t;
    best_values = values;
  }
  if (best == nullptr) return std::nullopt;
  EnglishMatch m{best->id, {}};
  for (size_t i = 0; i < best->names.size(); ++i)
    m.args.push_back({best->names[i], best_values[i]});
  return m;
}

EventMessage MakeEventMessage(std::string_view id, const MsgArgs& args, Json data) {
  Json msg_args = Json::object();
  for (const auto& a : args) msg_args[a.key] = a.value;
  data["msg_id"] = std::string(id);
  data["msg_args"] = std::move(msg_args);
  return {Tr(id, Lang::kEn, args), std::move(data)};
}

std::string StateLabel(std::string_view state, Lang lang) {
  std::string id = "run_state." + std::string(state);
  return Catalog::Default().Has(id) ? Tr(id, lang) : std::string(state);
}

std::string EventTypeLabel(std::string_view type, Lang lang) {
  std::string id = "event_type." + std::string(type);
  return Catalog::Default().Has(id) ? Tr(id, lang) : std::string(type);
}

std::string ReasonText(std::string_view english, Lang lang) { return Render(english, lang, 0); }

MsgArgs ArgsWithReasons(const Json& args, Lang lang) {
  MsgArgs out = MsgArgsFromJson(args);
  for (MsgArg& a : out) {
    if (a.key == "reason" || a.key == "why") a.value = ReasonText(a.value, lang);
  }
  return out;
}

std::string EventText(const Json& event, Lang lang) {
  const std::string type = event.value("type", "");
  const std::string message = event.value("message", "");
  const Json data = event.contains("data") ? event["data"] : Json::object();
  if (auto text = FromMsgId(data, lang, 0)) return *text;
  if (type == "diagnosis" && data.is_object() && data.contains("matches") &&
      data["matches"].is_array() && !data["matches"].empty()) {
    // The knowledge base's title, in the reader's language.
    const Json& m = data["matches"][0];
    const Json title = m.contains("title") && m["title"].is_object() ? m["title"] : Json::object();
    std::string id = m.value("id", "");
    std::string en = title.value("en", id), zh = title.value("zh", en);
    return Tr("event.diagnosis", lang, {{"id", id}, {"title", PickText(en, zh, lang)}});
  }
  std::string text = Render(message, lang, 0);
  if (text != message || lang == Lang::kEn) return text;
  if (type == "state" && data.is_object() && data.contains("to") && data["to"].is_string()) {
    return Tr("event.state_fallback", lang,
              {{"state", StateLabel(data["to"].get<std::string>(), lang)}, {"message", message}});
  }
  return message;
}

}  // namespace lathe::run
