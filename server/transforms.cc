#include "server/transforms.h"

#include <algorithm>
#include <cmath>

#include <opencv2/imgproc.hpp>

namespace stoker {
namespace {
// Python's round(): halves go to the even neighbour (torchvision uses it).
int PyRound(double x) { return static_cast<int>(std::nearbyint(x)); }
}  // namespace

CropBox RandomResizedCropBox(int height, int width, double scale_min, double scale_max,
                             double ratio_min, double ratio_max, Rng& rng) {
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
  return {(height - h) / 2, (width - w) / 2, h, w};
}

cv::Mat ResizedCrop(const cv::Mat& image, const CropBox& box, int size) {
  cv::Mat out;
  cv::resize(image(cv::Rect(box.left, box.top, box.width, box.height)), out, cv::Size(size, size), 0,
             0, cv::INTER_LINEAR);
  return out;
}

cv::Mat CenterCrop(const cv::Mat& image, int size) {
  cv::Mat src = image;
  if (image.rows < size || image.cols < size) {
    const int pad_h = std::max(0, size - image.rows), pad_w = std::max(0, size - image.cols);
    cv::copyMakeBorder(image, src, pad_h / 2, (pad_h + 1) / 2, pad_w / 2, (pad_w + 1) / 2,
                       cv::BORDER_CONSTANT, cv::Scalar::all(0));
  }
  const int top = PyRound((src.rows - size) / 2.0);
  const int left = PyRound((src.cols - size) / 2.0);
  return src(cv::Rect(left, top, size, size)).clone();
}

cv::Mat ResizeShorterSide(const cv::Mat& image, int shorter_side) {
  const bool portrait = image.rows > image.cols;
  const int s = portrait ? image.cols : image.rows, l = portrait ? image.rows : image.cols;
  const int new_long = static_cast<int>(static_cast<int64_t>(shorter_side) * l / s);
  const cv::Size size = portrait ? cv::Size(shorter_side, new_long) : cv::Size(new_long, shorter_side);
  if (size == image.size()) return image.clone();
  cv::Mat out;
  cv::resize(image, out, size, 0, 0, cv::INTER_LINEAR);
  return out;
}

void FlipHorizontalInPlace(cv::Mat& image) { cv::flip(image, image, 1); }

}  // namespace stoker
