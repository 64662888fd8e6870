#include "dataplane/kernels/resample.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <opencv2/imgproc.hpp>
#include "dataplane/kernels/transforms.h"

namespace stoker {
namespace {

constexpr int kPrecisionBits = 22;  // fixed-point weights; a sum of 255 x weights fits int32

double Triangle(double x) {
  x = std::fabs(x);
  return x < 1 ? 1 - x : 0;
}

// Keys' cubic convolution with a = -0.5 (PIL's and torchvision's bicubic).
double Cubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

// For each output index, the first input index it reads and its fixed-point
// weights (`taps` per output, zero past `count`).
struct Taps {
  int taps = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;  // out x taps
};

Taps ComputeTaps(int in_size, int out_size, bool cubic) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = (cubic ? 2.0 : 1.0) * filter_scale;
  Taps t;
  t.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<size_t>(out_size));
  t.count.resize(static_cast<size_t>(out_size));
  t.weights.assign(static_cast<size_t>(out_size) * t.taps, 0);
  std::vector<double> w(static_cast<size_t>(t.taps));
  for (int o = 0; o < out_size; ++o) {
    const double center = (o + 0.5) * scale;
    // Truncation toward zero, then clamped: the input pixels whose centres
    // lie within the support.
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    const int n = std::min(std::min(static_cast<int>(center + support + 0.5), in_size) - lo, t.taps);
    double total = 0;
    for (int k = 0; k < n; ++k) {
      const double x = (lo + k - center + 0.5) / filter_scale;
      w[static_cast<size_t>(k)] = cubic ? Cubic(x) : Triangle(x);
      total += w[static_cast<size_t>(k)];
    }
    t.first[static_cast<size_t>(o)] = lo;
    t.count[static_cast<size_t>(o)] = n;
    for (int k = 0; k < n; ++k) {
      const double v = total != 0 ? w[static_cast<size_t>(k)] / total : 0;
      const double fixed = v * (1 << kPrecisionBits);
      t.weights[static_cast<size_t>(o) * t.taps + k] = static_cast<int32_t>(fixed < 0 ? fixed - 0.5 : fixed + 0.5);
    }
  }
  return t;
}

// PIL's clip: <= 0 gives 0, >= 255 << bits gives 255, else the shifted sum.
inline uint8_t Clip8(int32_t sum) { return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255)); }

// One output row: the rounded, clipped sum of n input rows times their
// fixed-point weights, bytes [from, width). Integer arithmetic: every path
// gives the same bytes.
void WeightedRowsScalar(const uint8_t* const* rows, const int32_t* weights, int n, int from, int width, uint8_t* dst) {
  for (int i = from; i < width; ++i) {
    int32_t acc = 1 << (kPrecisionBits - 1);
    for (int k = 0; k < n; ++k) acc += static_cast<int32_t>(rows[k][i]) * weights[k];
    dst[i] = Clip8(acc);
  }
}

#if defined(__x86_64__)
// The same with AVX2: 32 bytes at a time, their sums kept in four registers
// of eight 32-bit lanes across the taps. Returns how many bytes it did.
__attribute__((target("avx2"))) int WeightedRowsAvx2(const uint8_t* const* rows, const int32_t* weights, int n,
                                                     int width, uint8_t* dst) {
  const __m256i half = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
  int i = 0;
  for (; i + 32 <= width; i += 32) {
    __m256i a0 = half, a1 = half, a2 = half, a3 = half;
    for (int k = 0; k < n; ++k) {
      const __m256i w = _mm256_set1_epi32(weights[k]);
      const uint8_t* s = rows[k] + i;
      a0 = _mm256_add_epi32(a0, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)s)), w));
      a1 = _mm256_add_epi32(a1, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(s + 8))), w));
      a2 = _mm256_add_epi32(a2, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(s + 16))), w));
      a3 = _mm256_add_epi32(a3, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(s + 24))), w));
    }
    // >> bits (arithmetic), then saturating packs clip to 0..255.
    a0 = _mm256_srai_epi32(a0, kPrecisionBits);
    a1 = _mm256_srai_epi32(a1, kPrecisionBits);
    a2 = _mm256_srai_epi32(a2, kPrecisionBits);
    a3 = _mm256_srai_epi32(a3, kPrecisionBits);
    const __m256i words01 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a0, a1), 0xd8);  // a0 | a1, in order
    const __m256i words23 = _mm256_permute4x64_epi64(_mm256_packs_epi32(a2, a3), 0xd8);
    const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(words01, words23), 0xd8);
    _mm256_storeu_si256((__m256i*)(dst + i), bytes);
  }
  return i;
}

#endif

std::atomic<bool> simd_allowed{true};

void WeightedRows(const uint8_t* const* rows, const int32_t* weights, int n, int width, uint8_t* dst) {
  int done = 0;
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2 && simd_allowed.load(std::memory_order_relaxed)) done = WeightedRowsAvx2(rows, weights, n, width, dst);
#endif
  WeightedRowsScalar(rows, weights, n, done, width, dst);
}

// `in` resampled along y into `out`; tap rows are relative to `row0`.
void Vertical(const cv::Mat& in, int row0, const Taps& t, cv::Mat& out) {
  const int width = out.cols * out.channels();
  std::vector<const uint8_t*> rows(static_cast<size_t>(t.taps));
  for (int y = 0; y < out.rows; ++y) {
    const int first = t.first[static_cast<size_t>(y)] - row0;
    const int n = t.count[static_cast<size_t>(y)];
    for (int k = 0; k < n; ++k) rows[static_cast<size_t>(k)] = in.ptr<uint8_t>(first + k);
    WeightedRows(rows.data(), &t.weights[static_cast<size_t>(y) * t.taps], n, width, out.ptr<uint8_t>(y));
  }
}

// Rows [row0, row0 + rows) of `in` resampled along x to `width` columns: the
// same sums as PIL's horizontal pass, computed as a vertical pass over the
// transposed rows (whole rows at a time vectorise; a pixel's few taps do
// not), then transposed back.
cv::Mat Horizontal(const cv::Mat& in, int row0, int rows, const Taps& t, int width) {
  cv::Mat turned;
  cv::transpose(in.rowRange(row0, row0 + rows), turned);  // in.cols x rows
  cv::Mat resampled(width, rows, in.type());
  Vertical(turned, 0, t, resampled);
  cv::Mat out;
  cv::transpose(resampled, out);
  return out;
}

}  // namespace

void SetResampleSimdForTesting(bool enabled) { simd_allowed.store(enabled); }

cv::Mat Resample(const cv::Mat& image, cv::Size size, int interpolation, bool antialias) {
  const bool shrinks = size.width < image.cols || size.height < image.rows;
  if (!antialias || interpolation == 1 || !shrinks || image.depth() != CV_8U || image.channels() == 2 ||
      image.channels() > 4) {
    cv::Mat out;
    if (size == image.size()) return image.clone();
    cv::resize(image, out, size, 0, 0, InterpolationFlag(interpolation));
    return out;
  }
  const bool cubic = interpolation == 2;
  cv::Mat src = image;
  if (size.width != image.cols) {
    // Only the rows the vertical pass reads.
    int row0 = 0, rows = image.rows;
    Taps vertical;
    if (size.height != image.rows) {
      vertical = ComputeTaps(image.rows, size.height, cubic);
      row0 = vertical.first.front();
      rows = vertical.first.back() + vertical.count.back() - row0;
    }
    const Taps horizontal = ComputeTaps(image.cols, size.width, cubic);
    cv::Mat out = Horizontal(image, row0, rows, horizontal, size.width);
    if (size.height == image.rows) return out;
    cv::Mat result(size, image.type());
    Vertical(out, row0, vertical, result);
    return result;
  }
  const Taps vertical = ComputeTaps(image.rows, size.height, cubic);
  cv::Mat result(size, image.type());
  Vertical(src, 0, vertical, result);
  return result;
}

}  // namespace stoker
