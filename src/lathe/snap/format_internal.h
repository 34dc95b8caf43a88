// Per-format checks behind CheckFormat (format_check.h). Internal to snap/.
#pragma once

#include <cstdint>
#include <string_view>

#include "lathe/snap/format_check.h"

namespace lathe::snap::internal {

// Each fills verdict, reason and tensor_offsets of `out` (format is set by
// the caller).
void CheckZip(const ByteSource& src, FormatCheck* out);
void CheckSafetensors(const ByteSource& src, FormatCheck* out);
void CheckNpy(const ByteSource& src, FormatCheck* out);

// Little-endian integer at p (no alignment needed).
uint64_t LoadLe(const char* p, int bytes);

inline void MarkIncomplete(FormatCheck* out, std::string reason) {
  out->verdict = Verdict::kIncomplete;
  out->reason = std::move(reason);
  out->tensor_offsets.clear();
}

}  // namespace lathe::snap::internal
