#include "dataplane/ops/detection_ops.h"

#include <algorithm>
#include <cmath>

namespace stoker {

cv::Size ResizePadSize(int height, int width, int size) {
  const int longer = std::max(height, width), shorter = std::min(height, width);
  // Halves to even, as Python's round (and so Albumentations' LongestMaxSize).
  const int scaled = std::max(1, static_cast<int>(std::nearbyint(static_cast<double>(shorter) * size / longer)));
  return height >= width ? cv::Size(scaled, size) : cv::Size(size, scaled);
}

namespace {

double Iou(const float* b, double left, double top, double right, double bottom) {
  const double iw = std::max(0.0, std::min<double>(b[2], right) - std::max<double>(b[0], left));
  const double ih = std::max(0.0, std::min<double>(b[3], bottom) - std::max<double>(b[1], top));
  const double inter = iw * ih;
  const double a = std::max(0.0f, b[2] - b[0]) * static_cast<double>(std::max(0.0f, b[3] - b[1]));
  const double uni = a + (right - left) * (bottom - top) - inter;
  return uni > 0 ? inter / uni : 0;
}

}  // namespace

std::optional<CropBox> RandomIouCropBox(const v1::RandomIoUCrop& o, int height, int width,
                                        const std::vector<float>& boxes, Rng& rng) {
  const int n = static_cast<int>(boxes.size() / 4);
  for (int draw = 0; draw < kIouCropMaxOptionDraws; ++draw) {
    const double min_iou = o.sampler_options(static_cast<int>(rng.UniformInt(0, o.sampler_options_size() - 1)));
    if (min_iou >= 1.0) return std::nullopt;  // the "leave as it is" option
    for (int trial = 0; trial < o.trials(); ++trial) {
      const double rw = o.min_scale() + (o.max_scale() - o.min_scale()) * rng.UniformDouble();
      const double rh = o.min_scale() + (o.max_scale() - o.min_scale()) * rng.UniformDouble();
      const int new_w = static_cast<int>(width * rw), new_h = static_cast<int>(height * rh);
      if (new_h <= 0) continue;
      const double aspect = static_cast<double>(new_w) / new_h;
      if (!(o.min_aspect_ratio() <= aspect && aspect <= o.max_aspect_ratio())) continue;
      const int left = static_cast<int>((width - new_w) * rng.UniformDouble());
      const int top = static_cast<int>((height - new_h) * rng.UniformDouble());
      const int right = left + new_w, bottom = top + new_h;
      if (left == right || top == bottom) continue;
      double best = -1;
      for (int i = 0; i < n; ++i) {
        const float* b = &boxes[static_cast<size_t>(4 * i)];
        const double cx = 0.5 * (b[0] + b[2]), cy = 0.5 * (b[1] + b[3]);
        if (!(left < cx && cx < right && top < cy && cy < bottom)) continue;
        best = std::max(best, Iou(b, left, top, right, bottom));
      }
      if (best < 0 || best < min_iou) continue;  // no box centre inside, or too little overlap
      return CropBox{top, left, new_h, new_w};
    }
  }
  return std::nullopt;
}

}  // namespace stoker
