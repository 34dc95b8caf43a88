// Splitting a list written as text ("python,r", a PATH-like "a:b", a URL
// path "/a/b") into its non-empty parts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lathe {

// The parts of `text` between `sep`s, in order, empty ones dropped
// ("a,,b," -> {"a", "b"}; "" -> {}).
inline std::vector<std::string> SplitNonEmpty(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= text.size()) {
    size_t at = text.find(sep, from);
    if (at == std::string_view::npos) at = text.size();
    if (at > from) out.emplace_back(text.substr(from, at - from));
    from = at + 1;
  }
  return out;
}

}  // namespace lathe
