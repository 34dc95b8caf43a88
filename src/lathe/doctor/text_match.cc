#include "lathe/doctor/text_match.h"

#include <algorithm>
#include <vector>

namespace lathe::doctor {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Length of the UTF-8 sequence led by `c`, 0 for a byte that cannot lead one.
size_t SeqLen(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

void AppendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool IsFold(char32_t c) {
  return c == '_' || c == '-' || c == '/' || c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
         c == 0x3000;
}

bool IsAsciiWordChar(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

}  // namespace

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = SeqLen(static_cast<unsigned char>(s[i]));
    if (len == 0 || i + len > s.size()) {
      out += kReplacement;
      ++i;
      continue;
    }
    char32_t c = len == 1 ? s[i] : static_cast<unsigned char>(s[i]) & (0x7F >> len);
    bool ok = true;
    for (size_t k = 1; k < len; ++k) {
      unsigned char b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) ok = false;
      c = (c << 6) | (b & 0x3F);
    }
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) ok = false;
    if (!ok) {
      out += kReplacement;
      ++i;
      continue;
    }
    out += c;
    i += len;
  }
  return out;
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : DecodeUtf8(s)) AppendUtf8(out, c);
  return out;
}

bool IsCjk(char32_t c) {
  return (c >= 0x3400 && c <= 0x9FFF) || (c >= 0xF900 && c <= 0xFAFF) ||
         (c >= 0x20000 && c <= 0x2FFFF);
}

std::string NormalizeKey(std::string_view s) {
  std::string out;
  bool pending_space = false;
  for (char32_t c : DecodeUtf8(s)) {
    if (IsFold(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    if (c >= 'A' && c <= 'Z') c = c - 'A' + 'a';
    AppendUtf8(out, c);
  }
  return out;
}

size_t EditDistance(std::u32string_view a, std::u32string_view b, size_t limit) {
  size_t diff = a.size() > b.size() ? a.size() - b.size() : b.size() - a.size();
  if (diff > limit) return limit + 1;
  // Two rows of the classic dynamic programme; stop when a whole row exceeds limit.
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    size_t row_min = cur[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t subst = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, subst});
      row_min = std::min(row_min, cur[j]);
    }
    if (row_min > limit) return limit + 1;
    std::swap(prev, cur);
  }
  return std::min(prev[b.size()], limit + 1);
}

std::set<std::string> PhraseTokens(std::string_view text) {
  std::set<std::string> out;
  std::u32string cps = DecodeUtf8(text);
  std::string word;
  for (size_t i = 0; i <= cps.size(); ++i) {
    char32_t c = i < cps.size() ? cps[i] : 0;
    if (IsAsciiWordChar(c)) {
      word += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      continue;
    }
    if (word.size() >= 2) out.insert(word);
    word.clear();
    if (!IsCjk(c)) continue;
    bool prev_cjk = i > 0 && IsCjk(cps[i - 1]);
    bool next_cjk = i + 1 < cps.size() && IsCjk(cps[i + 1]);
    std::string tok;
    AppendUtf8(tok, c);
    if (next_cjk) {
      AppendUtf8(tok, cps[i + 1]);
      out.insert(tok);
    } else if (!prev_cjk) {
      out.insert(tok);
    }
  }
  return out;
}

double PhraseOverlap(const std::set<std::string>& query_tokens,
                     const std::set<std::string>& doc_tokens) {
  if (query_tokens.empty()) return 0;
  size_t hit = 0;
  for (const auto& t : query_tokens) hit += doc_tokens.count(t);
  return static_cast<double>(hit) / static_cast<double>(query_tokens.size());
}

}  // namespace lathe::doctor
