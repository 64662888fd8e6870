#include "common/rng.h"

namespace stoker {
namespace {
constexpr uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
// Domain tags keep sample and epoch streams apart. Load-bearing.
constexpr uint64_t kSampleDomain = 0x53414d504c450001ULL;
constexpr uint64_t kEpochDomain = 0x45504f4348000002ULL;
}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t x = seed;
  for (uint64_t& s : s_) {
    x = Mix64(x);
    s = x;
  }
}

Rng Rng::ForSample(uint64_t seed, int64_t epoch, int64_t index) {
  return Rng(Mix64(Mix64(Mix64(seed ^ kSampleDomain) + static_cast<uint64_t>(epoch)) +
                   static_cast<uint64_t>(index)));
}

Rng Rng::ForEpoch(uint64_t seed, int64_t epoch) {
  return Rng(Mix64(Mix64(seed ^ kEpochDomain) + static_cast<uint64_t>(epoch)));
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int64_t Rng::UniformInt(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(Next());  // full 64-bit range
  // Rejection sampling removes modulo bias.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t x;
  do {
    x = Next();
  } while (x >= limit);
  return lo + static_cast<int64_t>(x % span);
}

}  // namespace stoker
