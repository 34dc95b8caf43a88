// Text helpers for looking things up in two languages: UTF-8 decoding,
// normalised keys, edit distance over code points, and the token sets used
// to match a Chinese (or English) scenario phrase against longer texts.
//
// All functions are pure and thread-safe. Invalid UTF-8 bytes decode as
// U+FFFD, one per byte, so no input can make them fail.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <string_view>

namespace lathe::doctor {

// UTF-8 → code points.
std::u32string DecodeUtf8(std::string_view s);

// `s` with every invalid byte replaced by U+FFFD (safe for JSON output).
std::string SanitizeUtf8(std::string_view s);

// True for CJK ideographs (U+3400–U+9FFF, U+F900–U+FAFF, U+20000–U+2FFFF).
bool IsCjk(char32_t c);

// The form two names are compared in: ASCII lower-cased; '_', '-', '/' and
// white space (also U+3000) folded to one ' '; trimmed. So "NCCL_IB_DISABLE",
// "nccl-ib-disable" and "nccl ib disable" share a key; CJK text is unchanged.
std::string NormalizeKey(std::string_view s);

// Levenshtein distance between the code points of `a` and `b`, or
// `limit + 1` as soon as it is known to exceed `limit` (cheap rejection).
size_t EditDistance(std::u32string_view a, std::u32string_view b, size_t limit);

// The tokens of a text for phrase matching: every pair of adjacent CJK
// characters ("多节", "节点", "点训", …), every single CJK character of a
// one-character run, and every ASCII word of two or more letters/digits,
// lower-cased ("nccl", "timeout").
std::set<std::string> PhraseTokens(std::string_view text);

// Share of the query's tokens found in `doc_tokens`, 0..1 (0 for a query
// without tokens).
double PhraseOverlap(const std::set<std::string>& query_tokens,
                     const std::set<std::string>& doc_tokens);

}  // namespace lathe::doctor
