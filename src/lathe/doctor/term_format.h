// How `lathe term` shows what it found: each term as "English ↔ 中文" with
// its context and usage in the reader's language, then the related
// knowledge-base entries. Parameter names are shown as they are.
#pragma once

#include <string>
#include <string_view>

#include "lathe/common/i18n.h"
#include "lathe/common/json.h"
#include "lathe/doctor/term_search.h"

namespace lathe::doctor {

std::string FormatTermResults(const TermResults& r, const Glossary& glossary, Lang lang,
                              bool color);

// {"query", "terms": [{"id", "en", "zh", "heading", "kind", "category",
//   "match", "distance", "context", "usage", "related", "kb"}],
//  "kb": [{"id", "title"}]} with texts in `lang`.
Json TermResultsToJson(const TermResults& r, std::string_view query, Lang lang);

}  // namespace lathe::doctor
