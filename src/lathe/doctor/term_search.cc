#include "lathe/doctor/term_search.h"

#include <algorithm>
#include <set>

#include "lathe/doctor/text_match.h"

namespace lathe::doctor {
namespace {

constexpr double kPhraseThreshold = 0.5;

std::vector<std::string> Keys(const GlossaryEntry& e) {
  std::vector<std::string> keys = {NormalizeKey(e.term.en), NormalizeKey(e.term.zh)};
  for (const auto& a : e.aliases) keys.push_back(NormalizeKey(a));
  return keys;
}

bool HasCjk(const std::u32string& s) {
  return std::any_of(s.begin(), s.end(), [](char32_t c) { return IsCjk(c); });
}

size_t FuzzyLimit(const std::u32string& q) {
  if (HasCjk(q)) return q.size() <= 3 ? 1 : 2;
  return q.size() <= 4 ? 1 : q.size() / 4;
}

bool WordPrefix(const std::string& key, const std::string& q) {
  if (key.starts_with(q)) return true;
  if (DecodeUtf8(q).size() < 2) return false;
  for (size_t pos = key.find(' '); pos != std::string::npos; pos = key.find(' ', pos + 1)) {
    if (key.compare(pos + 1, q.size(), q) == 0) return true;
  }
  return false;
}

// The best direct (exact / prefix / fuzzy) match of `q` against entry `e`.
bool DirectMatch(const GlossaryEntry& e, const std::string& q, const std::u32string& q32,
                 TermHit& hit) {
  bool found = false;
  size_t limit = FuzzyLimit(q32);
  for (const auto& key : Keys(e)) {
    TermHit h{&e, TermMatchKind::kFuzzy, 0, 0};
    if (key == q) {
      h.kind = TermMatchKind::kExact;
    } else if (WordPrefix(key, q)) {
      h.kind = TermMatchKind::kPrefix;
      h.distance = DecodeUtf8(key).size();  // shorter keys rank first
    } else {
      h.distance = EditDistance(DecodeUtf8(key), q32, limit);
      if (h.distance > limit) continue;
    }
    auto better = [](const TermHit& a, const TermHit& b) {
      return a.kind != b.kind ? a.kind < b.kind : a.distance < b.distance;
    };
    if (!found || better(h, hit)) hit = h;
    found = true;
  }
  return found;
}

std::set<std::string> TermTokens(const GlossaryEntry& e) {
  std::string all = e.term.en + " " + e.term.zh + " " + e.context.en + " " + e.context.zh;
  for (const auto& a : e.aliases) all += " " + a;
  return PhraseTokens(all);
}

std::set<std::string> KbTokens(const KbEntry& k) {
  return PhraseTokens(k.title.en + " " + k.title.zh + " " + k.scenario.en + " " + k.scenario.zh +
                      " " + k.cause.en + " " + k.cause.zh);
}

void SortHits(std::vector<TermHit>& hits) {
  std::stable_sort(hits.begin(), hits.end(), [](const TermHit& a, const TermHit& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.kind == TermMatchKind::kPhrase) return a.overlap > b.overlap;
    return a.distance < b.distance;
  });
}

std::vector<TermHit> PhraseTerms(const Glossary& g, const std::set<std::string>& qt) {
  std::vector<TermHit> hits;
  for (const auto& e : g.entries()) {
    double o = PhraseOverlap(qt, TermTokens(e));
    if (o >= kPhraseThreshold) hits.push_back({&e, TermMatchKind::kPhrase, 0, o});
  }
  return hits;
}

std::vector<const KbEntry*> PhraseKb(const KnowledgeBase& kb, const std::set<std::string>& qt) {
  std::vector<std::pair<double, const KbEntry*>> scored;
  for (const auto& k : kb.entries()) {
    double o = PhraseOverlap(qt, KbTokens(k));
    if (o >= kPhraseThreshold) scored.push_back({o, &k});
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<const KbEntry*> out;
  for (const auto& s : scored) out.push_back(s.second);
  return out;
}

void AddLinkedKb(const KnowledgeBase& kb, const std::vector<TermHit>& hits,
                 std::vector<const KbEntry*>& out) {
  for (const auto& h : hits) {
    for (const auto& id : h.entry->kb) {
      const KbEntry* k = kb.Find(id);
      if (k != nullptr && std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
    }
  }
}

}  // namespace

std::string_view TermMatchKindName(TermMatchKind k) {
  switch (k) {
    case TermMatchKind::kExact:
      return "exact";
    case TermMatchKind::kPrefix:
      return "prefix";
    case TermMatchKind::kFuzzy:
      return "fuzzy";
    case TermMatchKind::kPhrase:
      return "phrase";
  }
  return "exact";
}

Result<TermResults> SearchTerms(const Glossary& glossary, const KnowledgeBase& kb,
                                std::string_view query, const TermSearchOptions& opts) {
  std::string q = NormalizeKey(query);
  if (q.empty()) return Status::Msg(Code::kInvalidArgument, "term.empty_query");
  std::u32string q32 = DecodeUtf8(q);
  TermResults r;
  for (const auto& e : glossary.entries()) {
    TermHit h;
    if (DirectMatch(e, q, q32, h)) r.terms.push_back(h);
  }
  bool exact = std::any_of(r.terms.begin(), r.terms.end(),
                           [](const TermHit& h) { return h.kind == TermMatchKind::kExact; });
  if (exact) {  // an exact name needs no guesses next to it
    std::erase_if(r.terms, [](const TermHit& h) { return h.kind != TermMatchKind::kExact; });
  }
  if (r.terms.empty()) {
    std::set<std::string> qt = PhraseTokens(query);
    r.terms = PhraseTerms(glossary, qt);
    r.kb = PhraseKb(kb, qt);
  }
  SortHits(r.terms);
  if (r.terms.size() > opts.max_terms) r.terms.resize(opts.max_terms);
  AddLinkedKb(kb, r.terms, r.kb);
  if (r.kb.size() > opts.max_kb) r.kb.resize(opts.max_kb);
  return r;
}

}  // namespace lathe::doctor
