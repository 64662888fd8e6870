#include "dataplane/ops/photometric_ops.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_format.h"
#include "dataplane/kernels/simd.h"
#include "dataplane/kernels/transforms.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/sample/sample_watch.h"

namespace stoker {

void Solarize(cv::Mat& image, float threshold) {
  std::array<uint8_t, 256> lut;
  for (int v = 0; v < 256; ++v) lut[static_cast<size_t>(v)] = static_cast<uint8_t>(v >= threshold ? 255 - v : v);
  cv::LUT(image, cv::Mat(1, 256, CV_8U, lut.data()), image);
}

void Posterize(cv::Mat& image, int bits) {
  const uint8_t mask = bits <= 0 ? 0 : static_cast<uint8_t>(0xff << (8 - std::min(bits, 8)));
  cv::bitwise_and(image, cv::Scalar::all(mask), image);
}

void Equalize(cv::Mat& image) {
  std::array<std::array<int64_t, 256>, 3> hist{};
  for (int y = 0; y < image.rows; ++y) {
    const uint8_t* p = image.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols; ++x, p += 3) {
      for (int c = 0; c < 3; ++c) ++hist[static_cast<size_t>(c)][p[c]];
    }
  }
  std::array<std::array<uint8_t, 256>, 3> lut;
  std::array<bool, 3> identity{};
  for (size_t c = 0; c < 3; ++c) {
    int last = 255;
    while (last > 0 && hist[c][static_cast<size_t>(last)] == 0) --last;
    int64_t total = 0;
    for (int v = 0; v < last; ++v) total += hist[c][static_cast<size_t>(v)];  // all but the last occupied bin
    const int64_t step = total / 255;
    identity[c] = step == 0;
    int64_t below = 0;
    for (size_t v = 0; v < 256; ++v) {
      lut[c][v] = identity[c] ? static_cast<uint8_t>(v)
                              : static_cast<uint8_t>(std::min<int64_t>((below + step / 2) / step, 255));
      below += hist[c][v];
    }
  }
  for (int y = 0; y < image.rows; ++y) {
    uint8_t* p = image.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols; ++x, p += 3) {
      for (size_t c = 0; c < 3; ++c) p[c] = lut[c][p[c]];
    }
  }
}

void Autocontrast(cv::Mat& image) {
  std::vector<cv::Mat> channels;
  cv::split(image, channels);
  std::array<uint8_t, 256> lut[3];
  for (size_t c = 0; c < 3; ++c) {
    double lo = 0, hi = 0;
    cv::minMaxLoc(channels[c], &lo, &hi);
    float minimum = static_cast<float>(lo), scale = 255.0f / static_cast<float>(hi - lo);
    if (!std::isfinite(scale)) minimum = 0, scale = 1;
    for (int v = 0; v < 256; ++v) {
      lut[c][static_cast<size_t>(v)] =
          static_cast<uint8_t>(std::clamp((static_cast<float>(v) - minimum) * scale, 0.0f, 255.0f));
    }
  }
  for (int y = 0; y < image.rows; ++y) {
    uint8_t* p = image.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols; ++x, p += 3) {
      for (size_t c = 0; c < 3; ++c) p[c] = lut[c][p[c]];
    }
  }
}

namespace {

// One inner row of adjust_sharpness: torchvision's 3x3 smoothing kernel
// (1 1 1 / 1 5 1 / 1 1 1) / 13 in float32, rounded, then blended with the
// pixel. A flat loop (vectorised; an AVX2 build chosen at run time; no fused
// multiply-add, so the same bytes).
STOKER_AVX2_CLONES void SharpenRow(const uint8_t* __restrict up, const uint8_t* __restrict mid,
                                   const uint8_t* __restrict down, int from, int to, float f, float g,
                                   uint8_t* __restrict out) {
  const float side = 1.0f / 13, centre = 5.0f / 13;
  for (int i = from; i < to; ++i) {
    const float ring = static_cast<float>(up[i - 3] + up[i] + up[i + 3] + mid[i - 3] + mid[i + 3] + down[i - 3] +
                                          down[i] + down[i + 3]);
    const float blurred = RoundHalfEven(ring * side + static_cast<float>(mid[i]) * centre);
    out[i] = static_cast<uint8_t>(std::clamp(f * static_cast<float>(mid[i]) + g * blurred, 0.0f, 255.0f));
  }
}

}  // namespace

void AdjustSharpness(cv::Mat& image, double factor) {
  if (image.rows <= 2 || image.cols <= 2) return;
  const float f = static_cast<float>(factor), g = 1.0f - f;
  const cv::Mat source = image.clone();
  for (int y = 1; y + 1 < image.rows; ++y) {
    SharpenRow(source.ptr<uint8_t>(y - 1), source.ptr<uint8_t>(y), source.ptr<uint8_t>(y + 1), 3, (image.cols - 1) * 3,
               f, g, image.ptr<uint8_t>(y));
  }
  // The border: blended with itself, i.e. f x v + (1 - f) x v, truncated.
  auto keep = [&](uint8_t* p) {
    *p = static_cast<uint8_t>(std::clamp(f * static_cast<float>(*p) + g * static_cast<float>(*p), 0.0f, 255.0f));
  };
  for (int y = 0; y < image.rows; ++y) {
    uint8_t* row = image.ptr<uint8_t>(y);
    const bool edge_row = y == 0 || y + 1 == image.rows;
    for (int x = 0; x < image.cols; ++x) {
      if (edge_row || x == 0 || x + 1 == image.cols) {
        for (int c = 0; c < 3; ++c) keep(row + x * 3 + c);
      }
    }
  }
}

void Invert(cv::Mat& image) { cv::bitwise_not(image, image); }

void GrayscaleInPlace(cv::Mat& image) { cv::cvtColor(Grayscale(image), image, cv::COLOR_GRAY2RGB); }

void GaussianBlur(cv::Mat& image, int kernel_size, double sigma) {
  cv::Mat kernel(1, kernel_size, CV_32F);
  const float half = static_cast<float>(kernel_size - 1) * 0.5f;
  float total = 0;
  for (int i = 0; i < kernel_size; ++i) {
    // torch.linspace(-half, half, k): evenly spaced, in float32.
    const float x = kernel_size == 1 ? -half : -half + static_cast<float>(i) * (2 * half / (kernel_size - 1));
    const float v = std::exp(-0.5f * (x / static_cast<float>(sigma)) * (x / static_cast<float>(sigma)));
    kernel.at<float>(0, i) = v;
    total += v;
  }
  kernel /= total;
  cv::Mat f;
  image.convertTo(f, CV_32FC3);
  // In strips of rows, so that a stopped sample (SampleWatch) stops within
  // one: a strip is a view of `f`, and OpenCV takes the rows beyond it from
  // the whole image (its border only at the image's own edges), so the
  // result equals one call over the image.
  const int strip = std::max(1, static_cast<int>((int64_t{1} << 21) / std::max(1, image.cols)));
  cv::Mat blurred(f.size(), CV_32FC3);
  for (int y0 = 0; y0 < image.rows; y0 += strip) {
    if (SampleWatch::ShouldStop()) return;  // the pipeline reports why after the op
    const cv::Rect rows(0, y0, image.cols, std::min(strip, image.rows - y0));
    cv::Mat out = blurred(rows);
    cv::sepFilter2D(f(rows), out, CV_32F, kernel, kernel.t(), cv::Point(-1, -1), 0, cv::BORDER_REFLECT_101);
  }
  for (int y = 0; y < image.rows; ++y) {
    const float* s = blurred.ptr<float>(y);
    uint8_t* d = image.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols * 3; ++x)
      d[x] = static_cast<uint8_t>(std::clamp(std::nearbyint(s[x]), 0.0f, 255.0f));
  }
}

namespace {

// An op whose message is {factor 0..1000, p}: kApply(image, factor).
template <v1::Op::OpCase kCase, auto kGet, void (*kApply)(cv::Mat&, double)>
OpEntry FactorOp(const char* torchvision) {
  return WithParams({{"factor", 0, 1000}, kGateParam},
                    {kCase, torchvision, nullptr, [](const v1::Op& op) { return IsGated((op.*kGet)()); },
                     [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
                       const auto& o = (op.*kGet)();
                       if (PassesGate(o.has_p(), o.p(), 1, rng)) kApply(image, o.factor());
                     }});
}

// An op whose message is {p}: kApply(image).
template <v1::Op::OpCase kCase, auto kGet, void (*kApply)(cv::Mat&)>
OpEntry GatedOp(const char* torchvision) {
  return WithParams({kGateParam}, {kCase, torchvision, nullptr, [](const v1::Op& op) { return IsGated((op.*kGet)()); },
                                   [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
                                     if (PassesGate((op.*kGet)().has_p(), (op.*kGet)().p(), 1, rng)) kApply(image);
                                   }});
}

}  // namespace

const std::vector<OpEntry>& PhotometricOps() {
  static const auto* ops = new std::vector<OpEntry>{
      FactorOp<v1::Op::kAdjustBrightness, &v1::Op::adjust_brightness, AdjustBrightness>("F.adjust_brightness"),
      FactorOp<v1::Op::kAdjustContrast, &v1::Op::adjust_contrast, AdjustContrast>("F.adjust_contrast"),
      FactorOp<v1::Op::kAdjustSaturation, &v1::Op::adjust_saturation, AdjustSaturation>("F.adjust_saturation"),
      WithParams(
          {{"factor", -0.5, 0.5}, kGateParam},
          {v1::Op::kAdjustHue, "F.adjust_hue", nullptr, [](const v1::Op& op) { return IsGated(op.adjust_hue()); },
           [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
             const auto& o = op.adjust_hue();
             if (PassesGate(o.has_p(), o.p(), 1, rng) && o.factor() != 0) AdjustHue(image, o.factor());
           }}),
      WithParams({{"threshold", 0, 256}, kGateParam},
                 {v1::Op::kSolarize, "F.solarize", nullptr, [](const v1::Op& op) { return IsGated(op.solarize()); },
                  [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
                    const auto& o = op.solarize();
                    if (PassesGate(o.has_p(), o.p(), 1, rng)) Solarize(image, o.threshold());
                  }}),
      WithParams({{"bits", 0, 8}, kGateParam},
                 {v1::Op::kPosterize, "F.posterize", nullptr, [](const v1::Op& op) { return IsGated(op.posterize()); },
                  [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
                    const auto& o = op.posterize();
                    if (PassesGate(o.has_p(), o.p(), 1, rng)) Posterize(image, o.bits());
                  }}),
      GatedOp<v1::Op::kEqualize, &v1::Op::equalize, Equalize>("F.equalize"),
      GatedOp<v1::Op::kAutocontrast, &v1::Op::autocontrast, Autocontrast>("F.autocontrast"),
      FactorOp<v1::Op::kAdjustSharpness, &v1::Op::adjust_sharpness, AdjustSharpness>("F.adjust_sharpness"),
      GatedOp<v1::Op::kInvert, &v1::Op::invert, Invert>("F.invert"),
      GatedOp<v1::Op::kGrayscale, &v1::Op::grayscale, GrayscaleInPlace>("F.rgb_to_grayscale(num_output_channels=3)"),
      WithParams({{"p", 0, 1, 0.1}}, {v1::Op::kRandomGrayscale, "transforms.RandomGrayscale", nullptr,
                                      [](const v1::Op& op) { return op.random_grayscale().p() < 1; },
                                      [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
                                        if (PassesGate(true, op.random_grayscale().p(), 1, rng))
                                          GrayscaleInPlace(image);
                                      }}),
      WithParams(
          {{"kernel_size", 1, 101}, {"sigma_min", 0, 100, 0.1, "", true}, {"sigma_max", 0, 100, 2}, kGateParam},
          {v1::Op::kGaussianBlur, "transforms.GaussianBlur",
           [](const std::string& w, v1::Op& op, OpShape*) {
             // The ranges are declared; an odd kernel and the sigmas' order are checked here.
             const auto& o = op.gaussian_blur();
             if (o.kernel_size() < 1 || o.kernel_size() > 101 || o.kernel_size() % 2 == 0) {
               return absl::InvalidArgumentError(absl::StrFormat(
                   "%s.gaussian_blur.kernel_size = %d; need an odd number in 1..101", w, o.kernel_size()));
             }
             if (!(o.sigma_min() > 0 && o.sigma_min() <= o.sigma_max() && o.sigma_max() <= 100)) {
               return absl::InvalidArgumentError(absl::StrFormat(
                   "%s.gaussian_blur.sigma = %g:%g; need 0 < min <= max <= 100", w, o.sigma_min(), o.sigma_max()));
             }
             return absl::OkStatus();
           },
           [](const v1::Op& op) {
             return IsGated(op.gaussian_blur()) || op.gaussian_blur().sigma_min() < op.gaussian_blur().sigma_max();
           },
           [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
             const auto& o = op.gaussian_blur();
             if (!PassesGate(o.has_p(), o.p(), 1, rng)) return;
             const double sigma =
                 o.sigma_min() < o.sigma_max() ? rng.Uniform(o.sigma_min(), o.sigma_max()) : o.sigma_min();
             GaussianBlur(image, o.kernel_size(), sigma);
           }}),
  };
  return *ops;
}

}  // namespace stoker
