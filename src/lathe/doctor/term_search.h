// `lathe term WORD`: finds glossary terms (English ↔ 中文) and the
// knowledge-base entries of a scenario.
//
// A query is compared with every term's English name, Chinese name and
// aliases in NormalizeKey() form, in this order of preference:
//   exact   the whole key equals the query;
//   prefix  a key starts with the query, or one of its words does (≥ 2 characters);
//   fuzzy   the edit distance in code points is small: 1 for up to 4
//           characters (2 for CJK up to 3), else a quarter of the length;
//   phrase  a scenario phrase ("多节点训练中断", "dataloader killed"): the
//           query's tokens (text_match.h) mostly (≥ 50%) occur in a term's
//           names, aliases and context, or in a KB entry's title, scenario
//           and cause. Phrase search runs only when the earlier ones found nothing.
// KB entries come from phrase matches and from the `kb` lists of the terms found.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "lathe/common/status.h"
#include "lathe/doctor/glossary.h"
#include "lathe/doctor/kb.h"

namespace lathe::doctor {

enum class TermMatchKind { kExact, kPrefix, kFuzzy, kPhrase };
std::string_view TermMatchKindName(TermMatchKind k);  // "exact" | "prefix" | "fuzzy" | "phrase"

struct TermHit {
  const GlossaryEntry* entry = nullptr;
  TermMatchKind kind = TermMatchKind::kExact;
  size_t distance = 0;  // fuzzy: the edit distance
  double overlap = 0;   // phrase: the share of query tokens found
};

struct TermResults {
  std::vector<TermHit> terms;      // best first
  std::vector<const KbEntry*> kb;  // related knowledge-base entries, best first
};

struct TermSearchOptions {
  size_t max_terms = 8;  // at most this many terms
  size_t max_kb = 5;     // and this many KB entries
};

// Searches `glossary` (and `kb` for scenarios). InvalidArgument for a query
// that is empty after normalisation. Nothing found is an empty result, not
// an error. Both references must outlive the result.
Result<TermResults> SearchTerms(const Glossary& glossary, const KnowledgeBase& kb,
                                std::string_view query, const TermSearchOptions& opts = {});

}  // namespace lathe::doctor
