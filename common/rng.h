// Deterministic random numbers for Stoker. Every random choice made for sample
// i of epoch e draws from SampleRng(seed, e, i), so a sample's content never
// depends on which server, thread or retry produced it. The stream of numbers
// for given seeds is load-bearing (it fixes the content of every batch): do not
// change the mixing or the generator. Thread-compatible; cheap to copy.
#ifndef STOKER_COMMON_RNG_H_
#define STOKER_COMMON_RNG_H_

#include <cstddef>
#include <cstdint>

namespace stoker {

// SplitMix64 finaliser: a bijective 64-bit mix.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// xoshiro256** seeded through SplitMix64, with platform-independent helpers
// (std::uniform_*_distribution differ between standard libraries).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  // Generator for one sample of one epoch of a session.
  static Rng ForSample(uint64_t seed, int64_t epoch, int64_t index);
  // Generator for the sample order of one epoch of a session.
  static Rng ForEpoch(uint64_t seed, int64_t epoch);

  uint64_t Next();
  // Uniform in [0, 1) with 53 random bits.
  double UniformDouble();
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * UniformDouble(); }
  // Uniform integer in [lo, hi], both inclusive; requires lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi);

  // The sample a ForSample generator was made for (index -1: another
  // generator). User ops seed their own generators from it (python(...):
  // NumPy's default_rng([seed, epoch, index, op position])).
  struct Origin {
    uint64_t seed = 0;
    int64_t epoch = -1, index = -1;
  };
  const Origin& origin() const { return origin_; }

 private:
  uint64_t s_[4];
  Origin origin_;
};

// A standard normal draw (Box-Muller on two uniforms). Load-bearing, as the
// generator: random erasing's noise and every Gamma draw depend on it.
double StandardNormal(Rng& rng);

// A Gamma(alpha, 1) draw (Marsaglia and Tsang; alpha < 1 boosted by
// U^(1/alpha)), for AugMix's Dirichlet and Beta weights and MixUp's lambda.
double GammaDraw(double alpha, Rng& rng);

// A Beta(a, b) draw as Ga / (Ga + Gb).
double BetaDraw(double a, double b, Rng& rng);

// n standard normal draws for bulk noise (random erasing's per-pixel
// values): Boost.Random's ziggurat on this generator, several times faster
// than StandardNormal. Platform-independent (fixed tables, IEEE float).
void FillStandardNormal(Rng& rng, float* out, size_t n);

}  // namespace stoker

#endif  // STOKER_COMMON_RNG_H_
