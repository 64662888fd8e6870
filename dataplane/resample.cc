#include "dataplane/resample.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dataplane/transforms.h"
#include <opencv2/imgproc.hpp>

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

inline uint8_t Clip8(int32_t sum) {
  if (sum <= 0) return 0;
  if (sum >= (255 << kPrecisionBits)) return 255;
  return static_cast<uint8_t>(sum >> kPrecisionBits);
}

// Rows [row0, row0 + out.rows) of `in` resampled along x into `out`.
template <int C>
void Horizontal(const cv::Mat& in, int row0, const Taps& t, cv::Mat& out) {
  for (int y = 0; y < out.rows; ++y) {
    const uint8_t* src = in.ptr<uint8_t>(row0 + y);
    uint8_t* dst = out.ptr<uint8_t>(y);
    for (int x = 0; x < out.cols; ++x) {
      const uint8_t* p = src + t.first[static_cast<size_t>(x)] * C;
      const int32_t* w = &t.weights[static_cast<size_t>(x) * t.taps];
      const int n = t.count[static_cast<size_t>(x)];
      int32_t sum[C];
      for (int c = 0; c < C; ++c) sum[c] = 1 << (kPrecisionBits - 1);
      for (int k = 0; k < n; ++k) {
        for (int c = 0; c < C; ++c) sum[c] += p[k * C + c] * w[k];
      }
      for (int c = 0; c < C; ++c) dst[x * C + c] = Clip8(sum[c]);
    }
  }
}

// `in` resampled along y into `out`; tap rows are relative to `row0`. Rows
// are summed whole (contiguous, so the compiler vectorises the loop).
void Vertical(const cv::Mat& in, int row0, const Taps& t, cv::Mat& out) {
  const int width = out.cols * out.channels();
  std::vector<int32_t> sum(static_cast<size_t>(width));
  for (int y = 0; y < out.rows; ++y) {
    int32_t* __restrict acc = sum.data();
    std::fill(acc, acc + width, 1 << (kPrecisionBits - 1));
    const int32_t* w = &t.weights[static_cast<size_t>(y) * t.taps];
    const int first = t.first[static_cast<size_t>(y)] - row0;
    for (int k = 0; k < t.count[static_cast<size_t>(y)]; ++k) {
      const uint8_t* __restrict src = in.ptr<uint8_t>(first + k);
      const int32_t wk = w[k];
      for (int i = 0; i < width; ++i) acc[i] += static_cast<int32_t>(src[i]) * wk;
    }
    uint8_t* dst = out.ptr<uint8_t>(y);
    for (int i = 0; i < width; ++i) dst[i] = Clip8(acc[i]);
  }
}

void HorizontalAny(const cv::Mat& in, int row0, const Taps& t, cv::Mat& out) {
  switch (in.channels()) {
    case 1: return Horizontal<1>(in, row0, t, out);
    case 3: return Horizontal<3>(in, row0, t, out);
    default: return Horizontal<4>(in, row0, t, out);
  }
}

}  // namespace

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
    cv::Mat out(rows, size.width, image.type());
    HorizontalAny(image, row0, horizontal, out);
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
