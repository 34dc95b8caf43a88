// safetensors completeness: [u64 header length N][N bytes of JSON][data].
// The JSON gives every tensor's dtype, shape and [begin, end) offsets into
// the data section; a complete file's data section ends exactly at the
// largest end offset.
#include <nlohmann/json.hpp>

#include <string>

#include "lathe/snap/format_internal.h"

namespace lathe::snap::internal {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit

// Bytes per element; 0 for a dtype this check does not know.
uint64_t DtypeBytes(const std::string& dt) {
  if (dt == "F64" || dt == "I64" || dt == "U64" || dt == "C64") return 8;
  if (dt == "F32" || dt == "I32" || dt == "U32") return 4;
  if (dt == "F16" || dt == "BF16" || dt == "I16" || dt == "U16") return 2;
  if (dt == "I8" || dt == "U8" || dt == "BOOL" || dt == "F8_E4M3" || dt == "F8_E5M2") return 1;
  return 0;
}

// Checks one tensor entry; returns its end offset through *end.
bool CheckTensor(const std::string& name, const nlohmann::json& t, uint64_t data_bytes,
                 uint64_t* begin, uint64_t* end, std::string* why) {
  const auto& off = t.is_object() ? t.value("data_offsets", nlohmann::json()) : nlohmann::json();
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned()) {
    *why = "tensor " + name + " has no data_offsets";
    return false;
  }
  *begin = off[0].get<uint64_t>();
  *end = off[1].get<uint64_t>();
  if (*begin > *end || *end > data_bytes) {
    *why = "tensor " + name + " lies outside the data (truncated?)";
    return false;
  }
  uint64_t elem = DtypeBytes(t.value("dtype", std::string()));
  const auto& shape = t.value("shape", nlohmann::json());
  if (elem == 0 || !shape.is_array()) return true;  // unknown dtype: offsets only
  uint64_t n = elem;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) return true;
    n *= d.get<uint64_t>();
  }
  if (n != *end - *begin) {
    *why = "tensor " + name + ": shape and offsets disagree";
    return false;
  }
  return true;
}

}  // namespace

void CheckSafetensors(const ByteSource& src, FormatCheck* out) {
  std::string buf;
  if (src.size() < 8 || !src.ReadAt(0, 8, &buf).ok()) return MarkIncomplete(out, "file too short");
  uint64_t n = LoadLe(buf.data(), 8);
  if (n > kMaxHeaderBytes || n > src.size() - 8) {
    return MarkIncomplete(out, "header length " + std::to_string(n) + " exceeds the file");
  }
  if (!src.ReadAt(8, n, &buf).ok()) return MarkIncomplete(out, "cannot read the header");
  auto header = nlohmann::json::parse(buf, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return MarkIncomplete(out, "header is not JSON");
  uint64_t data_start = 8 + n, data_bytes = src.size() - data_start, max_end = 0;
  std::string why;
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__") continue;
    uint64_t b = 0, e = 0;
    if (!CheckTensor(name, t, data_bytes, &b, &e, &why)) return MarkIncomplete(out, why);
    max_end = std::max(max_end, e);
    out->tensor_offsets.push_back(data_start + b);
  }
  if (max_end != data_bytes) {
    return MarkIncomplete(out, "data is " + std::to_string(data_bytes) +
                                   " bytes, the header says " + std::to_string(max_end));
  }
  out->verdict = Verdict::kOk;
}

}  // namespace lathe::snap::internal
