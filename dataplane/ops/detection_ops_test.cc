// The detection ops' draws: resize_pad's size, random_iou_crop's crop.
#include "dataplane/ops/detection_ops.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(DetectionOpsTest, ResizePadScalesTheLongerSide) {
  EXPECT_EQ(ResizePadSize(480, 640, 512), cv::Size(512, 384));
  EXPECT_EQ(ResizePadSize(640, 480, 512), cv::Size(384, 512));
  EXPECT_EQ(ResizePadSize(50, 64, 56), cv::Size(56, 44));  // 43.75 rounds to 44
  EXPECT_EQ(ResizePadSize(1, 1000, 10), cv::Size(10, 1));  // never below 1
}

v1::RandomIoUCrop Defaults(std::vector<float> options) {
  v1::RandomIoUCrop o;
  o.set_min_scale(0.3f);
  o.set_max_scale(1);
  o.set_min_aspect_ratio(0.5f);
  o.set_max_aspect_ratio(2);
  o.set_trials(40);
  for (float v : options) o.add_sampler_options(v);
  return o;
}

TEST(DetectionOpsTest, IouCropHoldsABoxCentreWithTheDrawnOverlap) {
  const std::vector<float> boxes = {100, 100, 300, 250, 400, 50, 450, 120};
  int cropped = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    Rng rng(seed);
    const std::optional<CropBox> box = RandomIouCropBox(Defaults({0.5f}), 480, 640, boxes, rng);
    if (!box) continue;
    ++cropped;
    double best = 0;
    for (size_t i = 0; i < boxes.size(); i += 4) {
      const double cx = 0.5 * (boxes[i] + boxes[i + 2]), cy = 0.5 * (boxes[i + 1] + boxes[i + 3]);
      if (!(box->left < cx && cx < box->left + box->width && box->top < cy && cy < box->top + box->height)) continue;
      const double iw =
          std::max(0.0, std::min<double>(boxes[i + 2], box->left + box->width) - std::max<double>(boxes[i], box->left));
      const double ih = std::max(
          0.0, std::min<double>(boxes[i + 3], box->top + box->height) - std::max<double>(boxes[i + 1], box->top));
      const double area = (boxes[i + 2] - boxes[i]) * static_cast<double>(boxes[i + 3] - boxes[i + 1]);
      best = std::max(best, iw * ih / (area + box->width * static_cast<double>(box->height) - iw * ih));
    }
    EXPECT_GE(best, 0.5) << "seed " << seed;
    EXPECT_GE(box->left, 0);
    EXPECT_GE(box->top, 0);
    EXPECT_LE(box->left + box->width, 640);
    EXPECT_LE(box->top + box->height, 480);
    const double aspect = static_cast<double>(box->width) / box->height;
    EXPECT_TRUE(aspect >= 0.5 && aspect <= 2) << aspect;
  }
  EXPECT_GT(cropped, 150);  // the overlap is reachable: most seeds find a crop
}

TEST(DetectionOpsTest, IouCropLeavesTheImageForOptionOneOrNoBoxesAndIsDeterministic) {
  Rng a(7);
  EXPECT_FALSE(RandomIouCropBox(Defaults({1.0f}), 480, 640, {10, 10, 50, 50}, a).has_value());
  Rng b(7);
  EXPECT_FALSE(RandomIouCropBox(Defaults({0.1f}), 480, 640, {}, b).has_value());  // no centre to hold
  Rng c(9), d(9);
  const std::vector<float> boxes = {100, 100, 300, 250};
  const auto first = RandomIouCropBox(Defaults({0, 0.3f, 0.7f, 1}), 480, 640, boxes, c);
  const auto second = RandomIouCropBox(Defaults({0, 0.3f, 0.7f, 1}), 480, 640, boxes, d);
  ASSERT_EQ(first.has_value(), second.has_value());
  if (first) EXPECT_TRUE(*first == *second);
}

}  // namespace
}  // namespace stoker
