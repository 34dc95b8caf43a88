#include "lathe/snap/compress.h"

#include <zstd.h>

#include <memory>

namespace lathe::snap {
namespace {

constexpr int kChunkLevel = 3;
constexpr size_t kSampleBytes = 4096;
constexpr double kSampleMaxRatio = 0.90;  // sample must shrink at least this much
constexpr size_t kMaxFrameBytes = 1ull << 30;

struct CctxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DctxFree {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

ZSTD_CCtx* Cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CctxFree> c(ZSTD_createCCtx());
  return c.get();
}
ZSTD_DCtx* Dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DctxFree> c(ZSTD_createDCtx());
  return c.get();
}

size_t CompressInto(std::string_view raw, int level, std::string* out) {
  out->resize(ZSTD_compressBound(raw.size()));
  size_t n = ZSTD_compressCCtx(Cctx(), out->data(), out->size(), raw.data(), raw.size(), level);
  if (ZSTD_isError(n)) return 0;
  out->resize(n);
  return n;
}

}  // namespace

bool MaybeCompress(std::string_view raw, std::string* out) {
  if (raw.size() > 4 * kSampleBytes) {
    std::string_view sample = raw.substr(raw.size() / 2 - kSampleBytes / 2, kSampleBytes);
    size_t n = CompressInto(sample, 1, out);
    if (n == 0 || static_cast<double>(n) > kSampleMaxRatio * static_cast<double>(sample.size()))
      return false;
  }
  size_t n = CompressInto(raw, kChunkLevel, out);
  return n != 0 &&
         static_cast<double>(n) <= (1.0 - kMinCompressionSavings) * static_cast<double>(raw.size());
}

std::string Compress(std::string_view raw) {
  std::string out;
  CompressInto(raw, kChunkLevel, &out);
  return out;
}

Result<std::string> Decompress(std::string_view frame, size_t raw_size) {
  size_t want = raw_size;
  if (want == 0) {
    unsigned long long n = ZSTD_getFrameContentSize(frame.data(), frame.size());
    if (n == ZSTD_CONTENTSIZE_ERROR || n == ZSTD_CONTENTSIZE_UNKNOWN || n > kMaxFrameBytes) {
      return Status::InvalidArgument("damaged zstd frame");
    }
    want = static_cast<size_t>(n);
  }
  std::string out(want, '\0');
  size_t n = ZSTD_decompressDCtx(Dctx(), out.data(), out.size(), frame.data(), frame.size());
  if (ZSTD_isError(n) || n != want) return Status::InvalidArgument("damaged zstd frame");
  return out;
}

}  // namespace lathe::snap
