#include "lathe/common/units.h"
#include <ctime>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

namespace lathe {
namespace {

// Splits "1.5Gi" into the number 1.5 and the suffix "Gi". Returns false when
// there is no leading number or it is malformed.
bool SplitNumber(std::string_view s, double& number, std::string_view& suffix) {
  size_t i = 0;
  bool digits = false, dot = false;
  while (i < s.size()) {
    char c = s[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
    ++i;
  }
  if (!digits) return false;
  std::string num(s.substr(0, i));
  char* end = nullptr;
  number = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size()) return false;
  suffix = s.substr(i);
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Result<uint64_t> ToInteger(double v, std::string_view id, std::string_view input) {
  if (!(v >= 0) || v >= static_cast<double>(std::numeric_limits<uint64_t>::max())) {
    return Status::Msg(Code::kInvalidArgument, std::string(id), {{"value", std::string(input)}});
  }
  return static_cast<uint64_t>(std::llround(v));
}

}  // namespace

Result<uint64_t> ParseBytes(std::string_view in) {
  std::string_view s = Trim(in);
  double n = 0;
  std::string_view suf;
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "units.bad_bytes", {{"value", std::string(in)}});
  };
  if (!SplitNumber(s, n, suf)) return bad();
  if (!suf.empty() && (suf.back() == 'B' || suf.back() == 'b')) suf.remove_suffix(1);
  double mult = 1;
  if (suf.empty()) {
    mult = 1;
  } else {
    bool binary = suf.size() == 2 && suf[1] == 'i';
    if (suf.size() > 2 || (suf.size() == 2 && !binary)) return bad();
    int power = 0;
    switch (suf[0]) {
      case 'k':
      case 'K':
        power = 1;
        break;
      case 'M':
        power = 2;
        break;
      case 'G':
        power = 3;
        break;
      case 'T':
        power = 4;
        break;
      case 'P':
        power = 5;
        break;
      default:
        return bad();
    }
    mult = std::pow(binary ? 1024.0 : 1000.0, power);
  }
  return ToInteger(n * mult, "units.bad_bytes", in);
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view in) {
  std::string_view s = Trim(in);
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "units.bad_duration", {{"value", std::string(in)}});
  };
  if (s.empty()) return bad();
  double total_ms = 0;
  bool first = true;
  while (!s.empty()) {
    double n = 0;
    std::string_view rest;
    if (!SplitNumber(s, n, rest)) return bad();
    size_t unit_len = 0;
    while (unit_len < rest.size() && std::isalpha(static_cast<unsigned char>(rest[unit_len]))) {
      ++unit_len;
    }
    std::string_view unit = rest.substr(0, unit_len);
    double mult;
    if (unit.empty()) {
      if (!first || unit_len != rest.size()) return bad();
      mult = 1000;  // a bare number is seconds
    } else if (unit == "ms") {
      mult = 1;
    } else if (unit == "s") {
      mult = 1000;
    } else if (unit == "m" || unit == "min") {
      mult = 60'000;
    } else if (unit == "h") {
      mult = 3'600'000;
    } else if (unit == "d") {
      mult = 86'400'000;
    } else {
      return bad();
    }
    total_ms += n * mult;
    s = rest.substr(unit_len);
    first = false;
  }
  if (total_ms > 1e15) return bad();
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(total_ms)));
}

Result<uint64_t> ParseCount(std::string_view in) {
  std::string_view s = Trim(in);
  double n = 0;
  std::string_view suf;
  auto bad = [&] {
    return Status::Msg(Code::kInvalidArgument, "units.bad_count", {{"value", std::string(in)}});
  };
  if (!SplitNumber(s, n, suf)) return bad();
  double mult = 1;
  if (suf == "")
    mult = 1;
  else if (suf == "k" || suf == "K")
    mult = 1e3;
  else if (suf == "M")
    mult = 1e6;
  else if (suf == "B" || suf == "G")
    mult = 1e9;
  else if (suf == "T")
    mult = 1e12;
  else
    return bad();
  return ToInteger(n * mult, "units.bad_count", in);
}

namespace {
constexpr const char* kBinUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
constexpr const char* kDecUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
constexpr int kMaxUnit = 5;  // PB / PiB

// Whether `bytes` is a whole number of the largest binary unit it reaches
// (16GiB, 2MiB): such counts read best in binary units.
bool IsBinaryRound(uint64_t bytes) {
  uint64_t unit = 1;
  while (unit <= bytes / 1024 && unit < (1ull << 50)) unit *= 1024;
  return bytes >= 1024 && bytes % unit == 0;
}

// The index of the largest unit (of `base`) that `bytes` reaches.
int UnitIndex(uint64_t bytes, double base) {
  double v = static_cast<double>(bytes);
  int i = 0;
  while (v >= base && i < kMaxUnit) {
    v /= base;
    ++i;
  }
  return i;
}
}  // namespace

std::string FormatBytes(uint64_t bytes) {
  bool binary = IsBinaryRound(bytes);
  double base = binary ? 1024.0 : 1000.0;
  int i = UnitIndex(bytes, base);
  if (i == 0) return fmt::format("{}B", bytes);
  double v = static_cast<double>(bytes) / std::pow(base, i);
  const char* unit = binary ? kBinUnits[i] : kDecUnits[i];
  if (std::fabs(v - std::round(v)) < 0.05) return fmt::format("{:.0f}{}", v, unit);
  return fmt::format("{:.1f}{}", v, unit);
}

std::pair<std::string, std::string> FormatBytesPair(uint64_t a, uint64_t b) {
  constexpr int kMaxDecimals = 3;
  bool binary = IsBinaryRound(a) || IsBinaryRound(b);
  double base = binary ? 1024.0 : 1000.0;
  int i = UnitIndex(std::max(a, b), base);
  if (i > 0) {
    const char* unit = binary ? kBinUnits[i] : kDecUnits[i];
    double scale = std::pow(base, i);
    auto whole = [&](uint64_t x) { return std::fmod(static_cast<double>(x), scale) == 0; };
    for (int d = whole(a) && whole(b) ? 0 : 1; d <= kMaxDecimals; ++d) {
      std::string fa = fmt::format("{:.{}f}{}", static_cast<double>(a) / scale, d, unit);
      std::string fb = fmt::format("{:.{}f}{}", static_cast<double>(b) / scale, d, unit);
      if (a == b || fa != fb) return {fa, fb};
    }
  }
  return {fmt::format("{}B", a), fmt::format("{}B", b)};
}

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms < 1000) return fmt::format("{}ms", ms);
  int64_t s = ms / 1000;
  std::string out;
  int64_t days = s / 86400, h = (s % 86400) / 3600, m = (s % 3600) / 60, sec = s % 60;
  if (days) out += fmt::format("{}d", days);
  if (h) out += fmt::format("{}h", h);
  if (m) out += fmt::format("{}m", m);
  if (sec || out.empty()) out += fmt::format("{}s", sec);
  return out;
}

std::string FormatUtc(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace lathe
