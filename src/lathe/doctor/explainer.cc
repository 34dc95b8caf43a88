#include "lathe/doctor/explainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "lathe/common/json.h"
#include "lathe/doctor/regex_options.h"
#include "lathe/doctor/text_match.h"

namespace lathe::doctor {

struct Explainer::Tally {
  std::set<size_t> signatures;  // pattern indices
  std::set<size_t> hints;
  size_t first_line = 0;  // 0: no signature yet
  size_t first_pattern = 0;
  std::string line;
};

namespace {

// Moves `i` back to the start of a UTF-8 sequence.
size_t CharStart(std::string_view s, size_t i) {
  while (i > 0 && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

// The line cut to kMaxShownLineBytes, keeping the match in view.
std::string ShownLine(std::string_view line, const RE2& re) {
  if (line.size() <= kMaxShownLineBytes) return SanitizeUtf8(line);
  re2::StringPiece m;
  size_t at = 0;
  if (re.Match(re2::StringPiece(line.data(), line.size()), 0, line.size(), RE2::UNANCHORED, &m,
               1)) {
    at = static_cast<size_t>(m.data() - line.data());
  }
  size_t begin = CharStart(line, at > 40 ? at - 40 : 0);
  size_t end = CharStart(line, std::min(line.size(), begin + kMaxShownLineBytes));
  std::string out = begin > 0 ? "…" : "";
  out += SanitizeUtf8(line.substr(begin, end - begin));
  if (end < line.size()) out += "…";
  return out;
}

template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  size_t line_no = 1, start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    bool end = i == text.size() || text[i] == '\n' || text[i] == '\r';
    if (!end) continue;
    if (i > start) fn(line_no, text.substr(start, i - start));
    if (i < text.size() && text[i] == '\n') ++line_no;
    start = i + 1;
  }
}

}  // namespace

Result<std::unique_ptr<Explainer>> Explainer::Create(const KnowledgeBase& kb) {
  RE2::Set set(ExplainRegexOptions(), RE2::UNANCHORED);
  std::vector<Pattern> patterns;
  for (size_t i = 0; i < kb.entries().size(); ++i) {
    const KbEntry& e = kb.entries()[i];
    for (bool sig : {true, false}) {
      for (const auto& p : sig ? e.signatures : e.hints) {
        std::string err;
        if (set.Add(p, &err) < 0) {
          return Status::InvalidArgument(
              fmt::format("knowledge base entry '{}': pattern '{}': {}", e.id, p, err));
        }
        patterns.push_back({i, sig, std::make_unique<RE2>(p, ExplainRegexOptions())});
      }
    }
  }
  if (!set.Compile()) return Status::ResourceExhausted("cannot compile the signature set");
  return std::unique_ptr<Explainer>(new Explainer(kb, std::move(set), std::move(patterns)));
}

const Explainer& Explainer::Default() {
  static const Explainer* ex = [] {
    auto r = Create(KnowledgeBase::Default());
    if (!r.ok()) {
      std::fprintf(stderr, "lathe: %s\n", r.status().message().c_str());
      std::abort();
    }
    return std::move(r).value().release();
  }();
  return *ex;
}

void Explainer::MatchLine(std::string_view line, std::vector<int>& hits) const {
  hits.clear();
  RE2::Set::ErrorInfo info{RE2::Set::kNoError};
  re2::StringPiece sp(line.data(), line.size());
  if (set_.Match(sp, &hits, &info) || info.kind == RE2::Set::kNoError) return;
  // The set's DFA ran out of memory on this line: match one pattern at a time.
  hits.clear();
  for (size_t i = 0; i < patterns_.size(); ++i) {
    if (RE2::PartialMatch(sp, *patterns_[i].re)) hits.push_back(static_cast<int>(i));
  }
}

std::vector<KbMatch> Explainer::Explain(std::string_view log_text, size_t max_matches) const {
  std::vector<Tally> tallies(kb_.entries().size());
  std::vector<int> hits;
  ForEachLine(log_text, [&](size_t line_no, std::string_view line) {
    MatchLine(line, hits);
    for (int h : hits) {
      const Pattern& p = patterns_[static_cast<size_t>(h)];
      Tally& t = tallies[p.entry];
      if (!p.signature) {
        t.hints.insert(static_cast<size_t>(h));
        continue;
      }
      t.signatures.insert(static_cast<size_t>(h));
      if (t.first_line == 0) {
        t.first_line = line_no;
        t.first_pattern = static_cast<size_t>(h);
        t.line = ShownLine(line, *p.re);
      }
    }
  });
  std::vector<KbMatch> out = Rank(tallies, max_matches);
  for (auto& m : out) {
    if (m.entry->extract == "torchelastic_root_cause") {
      m.values = ExtractTorchelasticRootCause(log_text);
    }
  }
  return out;
}

namespace {

std::string_view TrimView(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

MsgArgs ExtractTorchelasticRootCause(std::string_view log) {
  std::vector<std::string_view> lines;
  ForEachLine(log, [&](size_t, std::string_view l) { lines.push_back(l); });
  size_t at = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find("Root Cause (first observed failure)") != std::string_view::npos) at = i;
  }
  if (at == lines.size()) return {};
  std::string rank, local_rank, host, exitcode, error;
  std::vector<std::string> traceback;
  bool in_traceback = false;
  for (size_t i = at + 1; i < lines.size(); ++i) {
    std::string_view l = TrimView(lines[i]);
    if (l.starts_with("====") || l.starts_with("----")) break;
    std::string key, value;
    if (RE2::FullMatch(re2::StringPiece(l.data(), l.size()), R"((\w+)\s*: ?(.*))", &key, &value) &&
        (key == "time" || key == "host" || key == "rank" || key == "exitcode" ||
         key == "error_file" || key == "traceback")) {
      in_traceback = key == "traceback";
      if (key == "host") host = value;
      if (key == "rank") {
        RE2::PartialMatch(value, R"(^(\d+))", &rank);
        RE2::PartialMatch(value, R"(local_rank: (\d+))", &local_rank);
      }
      if (key == "exitcode") RE2::PartialMatch(value, R"(^(-?\d+))", &exitcode);
      if (in_traceback) traceback.emplace_back(TrimView(value));
      continue;
    }
    if (in_traceback && !l.empty()) traceback.emplace_back(l);
  }
  if (!traceback.empty() && !traceback.back().starts_with("To enable traceback")) {
    error = traceback.back();
  }
  if (error.empty() && !rank.empty()) {
    // What the rank printed itself, as torchrun prefixes it ("[rank2]: ValueError: …").
    const std::string prefix = "[rank" + rank + "]:";
    for (size_t i = 0; i < at; ++i) {
      std::string_view l = TrimView(lines[i]);
      if (!l.starts_with(prefix)) continue;
      std::string_view rest = TrimView(l.substr(prefix.size()));
      if (RE2::PartialMatch(re2::StringPiece(rest.data(), rest.size()),
                            R"(^[\w.]*(Error|Exception|Interrupt)\b)")) {
        error = std::string(rest);
      }
    }
  }
  if (error.size() > kMaxShownLineBytes) error = error.substr(0, kMaxShownLineBytes) + "…";
  auto dash = [](const std::string& v) { return v.empty() ? std::string("-") : SanitizeUtf8(v); };
  return {{"rank", dash(rank)},
          {"local_rank", dash(local_rank)},
          {"host", dash(host)},
          {"exitcode", dash(exitcode)},
          {"error", dash(error)}};
}

std::string MatchDetail(const KbMatch& m, Lang lang) {
  if (!m.entry->detail || m.values.empty()) return "";
  return FillPlaceholders(m.entry->detail->Get(lang), m.values);
}

std::vector<KbMatch> Explainer::Rank(std::vector<Tally>& tallies, size_t max_matches) const {
  std::vector<KbMatch> out;
  for (size_t i = 0; i < tallies.size(); ++i) {
    Tally& t = tallies[i];
    if (t.signatures.empty()) continue;
    KbMatch m;
    m.entry = &kb_.entries()[i];
    m.score = static_cast<int>(10 * t.signatures.size() + t.hints.size());
    m.line_no = t.first_line;
    m.line = std::move(t.line);
    for (size_t p : t.signatures) m.signatures.push_back(patterns_[p].re->pattern());
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const KbMatch& a, const KbMatch& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.entry->priority != b.entry->priority) return a.entry->priority > b.entry->priority;
    if (a.line_no != b.line_no) return a.line_no < b.line_no;
    return a.entry->id < b.entry->id;
  });
  if (out.size() > max_matches) out.resize(max_matches);
  return out;
}

namespace {
Json Bi(const BiText& t) { return Json{{"en", t.en}, {"zh", t.zh}}; }
Json Values(const MsgArgs& args) {
  Json out = Json::object();
  for (const auto& a : args) out[a.key] = a.value;
  return out;
}
}  // namespace

Json DiagnoseLog(std::string_view log_text, size_t max_matches) {
  Json out = Json::array();
  for (const auto& m : Explainer::Default().Explain(log_text, max_matches)) {
    out.push_back(Json{
        {"id", m.entry->id},
        {"score", m.score},
        {"line_no", m.line_no},
        {"line", m.line},
        {"title", Bi(m.entry->title)},
        {"scenario", Bi(m.entry->scenario)},
        {"cause", Bi(m.entry->cause)},
        {"verify", m.entry->verify},
        {"fix", Bi(m.entry->fix)},
        {"detail", m.values.empty() || !m.entry->detail ? Json(nullptr)
                                                        : Json{{"en", MatchDetail(m, Lang::kEn)},
                                                               {"zh", MatchDetail(m, Lang::kZh)}}},
        {"values", Values(m.values)}});
  }
  return out;
}

}  // namespace lathe::doctor
