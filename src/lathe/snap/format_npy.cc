// .npy completeness: "\x93NUMPY", version, header length, a Python dict
// literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }, then
// exactly product(shape) x item size bytes of data.
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "lathe/snap/format_internal.h"

namespace lathe::snap::internal {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr uint64_t kMaxHeaderBytes = 1ull << 20;

// The quoted value after 'key': in the header dict, e.g. '<f4'.
std::optional<std::string> QuotedValue(const std::string& h, std::string_view key) {
  size_t k = h.find("'" + std::string(key) + "'");
  if (k == std::string::npos) return std::nullopt;
  size_t colon = h.find(':', k);
  size_t q = colon == std::string::npos ? colon : h.find_first_not_of(" ", colon + 1);
  if (q == std::string::npos || (h[q] != '\'' && h[q] != '"')) return std::nullopt;
  size_t e = h.find(h[q], q + 1);
  if (e == std::string::npos) return std::nullopt;
  return h.substr(q + 1, e - q - 1);
}

// The integers of 'shape': (a, b, ...); nullopt when it cannot be parsed.
std::optional<std::vector<uint64_t>> Shape(const std::string& h) {
  size_t k = h.find("'shape'");
  size_t open = k == std::string::npos ? k : h.find('(', k);
  size_t close = open == std::string::npos ? open : h.find(')', open);
  if (close == std::string::npos) return std::nullopt;
  std::vector<uint64_t> dims;
  std::string cur;
  for (size_t i = open + 1; i <= close; ++i) {
    char c = h[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur += c;
    } else if (c == ',' || c == ')') {
      if (!cur.empty()) dims.push_back(std::stoull(cur));
      cur.clear();
    } else if (c != ' ' && c != 'L') {
      return std::nullopt;
    }
  }
  return dims;
}

// Item size of a simple dtype string such as '<f4', '|b1', '<U10', '<M8[ns]'.
// 0 when it cannot be computed (object arrays, structured dtypes).
uint64_t ItemBytes(const std::string& descr) {
  size_t i = 0;
  if (i < descr.size() && std::string_view("<>|=").find(descr[i]) != std::string_view::npos) ++i;
  if (i >= descr.size()) return 0;
  char kind = descr[i++];
  std::string digits;
  while (i < descr.size() && std::isdigit(static_cast<unsigned char>(descr[i])))
    digits += descr[i++];
  if (digits.empty() || kind == 'O' || digits.size() > 6) return 0;
  uint64_t n = std::stoull(digits);
  return kind == 'U' ? 4 * n : n;
}

}  // namespace

void CheckNpy(const ByteSource& src, FormatCheck* out) {
  std::string buf;
  if (src.size() < 10 || !src.ReadAt(0, 10, &buf).ok())
    return MarkIncomplete(out, "file too short");
  if (buf.compare(0, 6, kMagic) != 0) return MarkIncomplete(out, "not an .npy file (bad magic)");
  bool v1 = buf[6] == 1;
  uint64_t len_bytes = v1 ? 2 : 4, start = 8 + len_bytes;
  if (!v1 && (src.size() < 12 || !src.ReadAt(0, 12, &buf).ok()))
    return MarkIncomplete(out, "file too short");
  uint64_t hlen = LoadLe(&buf[8], static_cast<int>(len_bytes));
  if (hlen > kMaxHeaderBytes || start + hlen > src.size() || !src.ReadAt(start, hlen, &buf).ok()) {
    return MarkIncomplete(out, "header runs past the end of the file");
  }
  auto descr = QuotedValue(buf, "descr");
  auto shape = Shape(buf);
  uint64_t item = descr ? ItemBytes(*descr) : 0;
  if (!shape || item == 0) {
    out->verdict = Verdict::kUnchecked;  // object or structured dtype: size unknown
    out->reason = "dtype not checked";
    return;
  }
  uint64_t expect = item;
  for (uint64_t d : *shape) expect *= d;
  uint64_t have = src.size() - start - hlen;
  if (have != expect) {
    return MarkIncomplete(out, "data is " + std::to_string(have) + " bytes, the header says " +
                                   std::to_string(expect));
  }
  out->tensor_offsets.push_back(start + hlen);
  out->verdict = Verdict::kOk;
}

}  // namespace lathe::snap::internal
