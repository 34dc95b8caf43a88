// Columns a string takes on a terminal: CJK and other East Asian wide
// characters take two, every other character one. Tables that line up in
// Chinese as in English count with it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace lathe {

// Wide characters of the Basic Multilingual Plane take two columns, other
// UTF-8 one, and characters beyond the BMP two (most of them are emoji or CJK).
size_t DisplayWidth(std::string_view s);

// `s` cut to at most `width` columns, never inside a character; "…" ends a
// string that was cut (counted in the width).
std::string FitWidth(std::string_view s, size_t width);

// `s` padded with spaces to `width` columns (left-aligned), or right-aligned
// with PadLeft; a longer `s` is returned as it is.
std::string PadRight(std::string_view s, size_t width);
std::string PadLeft(std::string_view s, size_t width);

}  // namespace lathe
