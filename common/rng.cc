#include "common/rng.h"

#include <cmath>
#include <limits>

#include <boost/random/normal_distribution.hpp>

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
  Rng rng(Mix64(Mix64(Mix64(seed ^ kSampleDomain) + static_cast<uint64_t>(epoch)) + static_cast<uint64_t>(index)));
  rng.origin_ = {seed, epoch, index};
  return rng;
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

double StandardNormal(Rng& rng) {
  const double u1 = 1.0 - rng.UniformDouble();  // (0, 1]: the log is finite
  const double u2 = rng.UniformDouble();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double GammaDraw(double alpha, Rng& rng) {
  if (alpha < 1) return GammaDraw(alpha + 1, rng) * std::pow(1.0 - rng.UniformDouble(), 1.0 / alpha);
  const double d = alpha - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  for (;;) {
    double x, v;
    do {
      x = StandardNormal(rng);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = 1.0 - rng.UniformDouble();
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

namespace {

// Rng as a uniform random bit generator for Boost.Random.
struct Bits {
  using result_type = uint64_t;
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<uint64_t>::max(); }
  result_type operator()() { return rng->Next(); }
  Rng* rng;
};

}  // namespace

void FillStandardNormal(Rng& rng, float* out, size_t n) {
  Bits bits{&rng};
  boost::random::normal_distribution<float> normal;
  for (size_t i = 0; i < n; ++i) out[i] = normal(bits);
}

double BetaDraw(double a, double b, Rng& rng) {
  const double x = GammaDraw(a, rng);
  const double y = GammaDraw(b, rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace stoker
