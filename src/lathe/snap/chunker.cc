#include "lathe/snap/chunker.h"

#include <array>
#include <bit>

namespace lathe::snap {
namespace {

// The gear table: 256 pseudo-random 64-bit values from splitmix64 with a fixed
// seed. Generated at compile time so it can never drift between builds; it is
// part of the store format.
constexpr uint64_t kGearSeed = 0x6c617468652d3031ULL;  // "lathe-01"

constexpr std::array<uint64_t, 256> MakeGear() {
  std::array<uint64_t, 256> t{};
  uint64_t x = kGearSeed;
  for (auto& v : t) {
    x += 0x9e3779b97f4a7c15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    v = z ^ (z >> 31);
  }
  return t;
}
constexpr std::array<uint64_t, 256> kGear = MakeGear();

// A mask of the `bits` highest bits. The gear hash shifts left once per byte,
// so bit k depends on the last k+1 bytes: high bits see a ~64-byte window,
// low bits only a few bytes.
constexpr uint64_t HighMask(int bits) { return bits <= 0 ? 0 : ~0ULL << (64 - bits); }

// Normalized chunking, level 2 (FastCDC paper): two bits harder before the
// normal point, two bits easier after it, which narrows the size spread.
constexpr int kNormalizationBits = 2;

}  // namespace

bool ValidChunkerParams(const ChunkerParams& p) {
  return p.min_bytes >= 64 && p.min_bytes < p.avg_bytes && p.avg_bytes < p.max_bytes &&
         std::has_single_bit(p.avg_bytes) && p.max_bytes <= 16u * 1024 * 1024;
}

GearChunker::GearChunker(const ChunkerParams& p) : p_(p) {
  int bits = std::countr_zero(p.avg_bytes);
  mask_small_ = HighMask(bits + kNormalizationBits);
  mask_large_ = HighMask(bits - kNormalizationBits);
}

size_t GearChunker::NextCut(const uint8_t* data, size_t n, bool final) const {
  if (n < p_.max_bytes && !final) return 0;  // a cut may still lie beyond n
  if (n <= p_.min_bytes) return n;
  size_t end = n < p_.max_bytes ? n : p_.max_bytes;
  size_t normal = end < p_.avg_bytes ? end : p_.avg_bytes;
  uint64_t h = 0;
  size_t i = p_.min_bytes;  // cut-point skipping: nothing is cut before min
  for (; i < normal; ++i) {
    h = (h << 1) + kGear[data[i]];
    if ((h & mask_small_) == 0) return i + 1;
  }
  for (; i < end; ++i) {
    h = (h << 1) + kGear[data[i]];
    if ((h & mask_large_) == 0) return i + 1;
  }
  return end;
}

}  // namespace lathe::snap
