#include "dataplane/kernels/transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <opencv2/imgproc.hpp>
#include "dataplane/kernels/resample.h"
#include "dataplane/kernels/simd.h"

namespace stoker {
namespace {
// Python's round(): halves go to the even neighbour (torchvision uses it).
int PyRound(double x) { return static_cast<int>(std::nearbyint(x)); }
}  // namespace

CropBox RandomResizedCropBox(int height, int width, double scale_min, double scale_max, double ratio_min,
                             double ratio_max, Rng& rng) {
  const double area = static_cast<double>(height) * width;
  const double log_lo = std::log(ratio_min), log_hi = std::log(ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(scale_min, scale_max);
    const double aspect = std::exp(rng.Uniform(log_lo, log_hi));
    const int w = PyRound(std::sqrt(target_area * aspect));
    const int h = PyRound(std::sqrt(target_area / aspect));
    if (w > 0 && w <= width && h > 0 && h <= height) {
      const int top = static_cast<int>(rng.UniformInt(0, height - h));
      const int left = static_cast<int>(rng.UniformInt(0, width - w));
      return {top, left, h, w};
    }
  }
  // Fallback: central crop with the ratio clamped into range.
  const double in_ratio = static_cast<double>(width) / height;
  int w = width, h = height;
  if (in_ratio < ratio_min) {
    h = PyRound(w / ratio_min);
  } else if (in_ratio > ratio_max) {
    w = PyRound(h * ratio_max);
  }
  // Extreme ratios can round a side to 0; keep at least one pixel.
  h = std::clamp(h, 1, height);
  w = std::clamp(w, 1, width);
  return {(height - h) / 2, (width - w) / 2, h, w};
}

int InterpolationFlag(int interpolation) {
  switch (interpolation) {
    case 1: return cv::INTER_NEAREST;
    case 2: return cv::INTER_CUBIC;
    default: return cv::INTER_LINEAR;
  }
}

cv::Mat ResizedCrop(const cv::Mat& image, const CropBox& box, int size, int interpolation, bool antialias) {
  return Resample(image(cv::Rect(box.left, box.top, box.width, box.height)), cv::Size(size, size), interpolation,
                  antialias);
}

CropBox CenterCropBox(int height, int width, int size) {
  return {PyRound((height - size) / 2.0), PyRound((width - size) / 2.0), size, size};
}

cv::Mat CenterCrop(const cv::Mat& image, int size) {
  cv::Mat src = image;
  if (image.rows < size || image.cols < size) {
    const int pad_h = std::max(0, size - image.rows), pad_w = std::max(0, size - image.cols);
    cv::copyMakeBorder(image, src, pad_h / 2, (pad_h + 1) / 2, pad_w / 2, (pad_w + 1) / 2, cv::BORDER_CONSTANT,
                       cv::Scalar::all(0));
  }
  const CropBox box = CenterCropBox(src.rows, src.cols, size);
  return src(cv::Rect(box.left, box.top, size, size)).clone();
}

CropBox CenterCropRegion(int height, int width, int size) {
  const int pad_h = std::max(0, size - height), pad_w = std::max(0, size - width);
  CropBox box = CenterCropBox(height + pad_h, width + pad_w, size);
  box.top -= pad_h / 2;
  box.left -= pad_w / 2;
  return box;
}

cv::Size ShorterSideSize(int height, int width, int shorter_side) {
  const bool portrait = height > width;
  const int s = portrait ? width : height, l = portrait ? height : width;
  const int new_long = static_cast<int>(static_cast<int64_t>(shorter_side) * l / s);
  return portrait ? cv::Size(shorter_side, new_long) : cv::Size(new_long, shorter_side);
}

cv::Mat ResizeShorterSide(const cv::Mat& image, int shorter_side, int interpolation, bool antialias) {
  const cv::Size size = ShorterSideSize(image.rows, image.cols, shorter_side);
  if (size == image.size()) return image.clone();
  return Resample(image, size, interpolation, antialias);
}

namespace {

// One blended value, as torchvision's _blend on uint8: f x p + (1 - f) x b
// in float32, clipped, truncated (.to(torch.uint8)).
inline uint8_t BlendValue(float f, float g, float p, float b) {
  return static_cast<uint8_t>(std::clamp(f * p + g * b, 0.0f, 255.0f));
}

// A row blended with a per-pixel grey row (expanded to RGB first, so that
// the loop is flat and the compiler vectorises it; built once more for
// AVX2, chosen at run time; no fused multiply-add in either, so the bytes
// are the same).
STOKER_AVX2_CLONES void BlendRow(uint8_t* __restrict p, const uint8_t* __restrict grey3, int n, float f, float g) {
  for (int i = 0; i < n; ++i) p[i] = BlendValue(f, g, static_cast<float>(p[i]), static_cast<float>(grey3[i]));
}

// blend(image, other, f) with other given per pixel (or constant when
// `other` is empty, using `constant`).
void Blend(cv::Mat& image, const cv::Mat& other, double constant, double factor) {
  const float f = static_cast<float>(factor), g = 1.0f - f;
  if (other.empty()) {  // each value's result depends on the value alone: a table
    uint8_t table[256];
    for (int v = 0; v < 256; ++v) table[v] = BlendValue(f, g, static_cast<float>(v), static_cast<float>(constant));
    cv::LUT(image, cv::Mat(1, 256, CV_8U, table), image);
    return;
  }
  std::vector<uint8_t> grey3(static_cast<size_t>(image.cols) * 3);
  for (int y = 0; y < image.rows; ++y) {
    const uint8_t* o = other.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols; ++x) grey3[3 * x] = grey3[3 * x + 1] = grey3[3 * x + 2] = o[x];
    BlendRow(image.ptr<uint8_t>(y), grey3.data(), image.cols * 3, f, g);
  }
}

}  // namespace

namespace {

// One row to grey, torchvision's weights in float32, truncated (vectorised;
// an AVX2 build chosen at run time; the same bytes).
STOKER_AVX2_CLONES void GreyRow(const uint8_t* __restrict p, int n, uint8_t* __restrict g) {
  for (int x = 0; x < n; ++x) {
    g[x] = static_cast<uint8_t>(0.2989f * static_cast<float>(p[3 * x]) + 0.587f * static_cast<float>(p[3 * x + 1]) +
                                0.114f * static_cast<float>(p[3 * x + 2]));
  }
}

}  // namespace

cv::Mat Grayscale(const cv::Mat& image) {
  cv::Mat gray(image.rows, image.cols, CV_8UC1);
  for (int y = 0; y < image.rows; ++y) GreyRow(image.ptr<uint8_t>(y), image.cols, gray.ptr<uint8_t>(y));
  return gray;
}

void AdjustBrightness(cv::Mat& image, double factor) { Blend(image, cv::Mat(), 0.0, factor); }

void AdjustContrast(cv::Mat& image, double factor) { Blend(image, cv::Mat(), cv::mean(Grayscale(image))[0], factor); }

void AdjustSaturation(cv::Mat& image, double factor) { Blend(image, Grayscale(image), 0.0, factor); }

void AdjustHue(cv::Mat& image, double shift) {
  cv::Mat f, hsv;
  image.convertTo(f, CV_32FC3, 1.0 / 255);
  cv::cvtColor(f, hsv, cv::COLOR_RGB2HSV);  // H in degrees [0, 360)
  const float degrees = static_cast<float>(shift * 360.0);
  for (int y = 0; y < hsv.rows; ++y) {
    cv::Vec3f* p = hsv.ptr<cv::Vec3f>(y);
    for (int x = 0; x < hsv.cols; ++x) p[x][0] = std::fmod(p[x][0] + degrees + 360.0f, 360.0f);
  }
  cv::cvtColor(hsv, f, cv::COLOR_HSV2RGB);
  f.convertTo(f, CV_32FC3, 256.0 - 1e-3);  // torchvision convert_image_dtype to uint8
  for (int y = 0; y < image.rows; ++y) {
    const float* s = f.ptr<float>(y);
    uint8_t* d = image.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols * 3; ++x) d[x] = static_cast<uint8_t>(std::clamp(s[x], 0.0f, 255.0f));
  }
}

void FlipHorizontalInPlace(cv::Mat& image) { cv::flip(image, image, 1); }

}  // namespace stoker
