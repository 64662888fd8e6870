// Targets follow the geometric steps exactly as the pixels do.
#include "dataplane/sample/geometry.h"

#include <limits>

#include "dataplane/decode/image_decoder.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

SampleTargets TwoBoxes() {
  SampleTargets t;
  t.boxes = {10, 10, 30,  20,   // inside
             90, 5,  110, 15};  // half outside a crop at x < 100
  t.labels = {3, 7};
  t.crowd = {0, 1};
  t.points_per_box = 1;
  t.keypoints = {20, 15, 2, 95, 10, 2};
  return t;
}

TEST(GeometryTest, CropClipsAndDropsByVisibilityWithEverythingABoxOwns) {
  SampleTargets t = TwoBoxes();
  GeometryLog log{200, 100, {GeometryStep::Crop({0, 0, 80, 100})}};  // top, left, height, width
  ASSERT_TRUE(ApplyGeometry(log, {0.6}, &t).ok());
  // Box 1 keeps 10 of 20 px: 0.5 < 0.6, dropped with its label, flag and keypoint.
  EXPECT_EQ(t.boxes, (std::vector<float>{10, 10, 30, 20}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{3}));
  EXPECT_EQ(t.crowd, (std::vector<int32_t>{0}));
  EXPECT_EQ(t.keypoints, (std::vector<float>{20, 15, 2}));

  SampleTargets kept = TwoBoxes();
  ASSERT_TRUE(ApplyGeometry(log, {0.5}, &kept).ok());
  EXPECT_EQ(kept.boxes, (std::vector<float>{10, 10, 30, 20, 90, 5, 100, 15}));
  EXPECT_EQ(kept.keypoints, (std::vector<float>{20, 15, 2, 95, 10, 2}));

  SampleTargets shifted = TwoBoxes();
  GeometryLog off{200, 100, {GeometryStep::Crop({5, 92, 40, 20})}};
  ASSERT_TRUE(ApplyGeometry(off, {}, &shifted).ok());
  EXPECT_EQ(shifted.boxes, (std::vector<float>{0, 0, 18, 10}));  // only box 1 meets the crop
  EXPECT_EQ(shifted.labels, (std::vector<int32_t>{7}));
  EXPECT_EQ(shifted.keypoints, (std::vector<float>{3, 5, 2}));
}

TEST(GeometryTest, ResizeScalesAndFlipsMirrorAroundTheImageEdges) {
  SampleTargets t = TwoBoxes();
  t.points_per_box = 0;
  t.keypoints.clear();
  GeometryLog log{
      200,
      100,
      {GeometryStep::Resize(100, 200), GeometryStep::FlipHorizontal(100, 200), GeometryStep::FlipVertical(100, 200)}};
  ASSERT_TRUE(ApplyGeometry(log, {}, &t).ok());
  // Resize: x * 0.5, y * 2; then x -> 100 - x (swapping x1, x2), y -> 200 - y.
  EXPECT_EQ(t.boxes, (std::vector<float>{85, 160, 95, 180, 45, 170, 55, 190}));
}

TEST(GeometryTest, MasksAreCutPaddedResizedNearestAndFlipped) {
  SampleTargets t;
  t.mask = cv::Mat::zeros(4, 6, CV_8U);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 6; ++x) t.mask.at<uint8_t>(y, x) = static_cast<uint8_t>(10 * y + x);
  }
  t.instance_masks.push_back(t.mask.clone());
  t.boxes = {0, 0, 6, 4};
  GeometryLog log{
      6, 4, {GeometryStep::Crop({-1, 4, 3, 3}), GeometryStep::FlipHorizontal(3, 3), GeometryStep::Resize(6, 6)}};
  ASSERT_TRUE(ApplyGeometry(log, {}, &t).ok());
  // Crop rows -1..1, cols 4..6 (col 6 and row -1 are padding), flip, then
  // nearest neighbour doubles each pixel.
  const uint8_t cut[3][3] = {{0, 0, 0}, {0, 5, 4}, {0, 15, 14}};
  ASSERT_EQ(t.mask.size(), cv::Size(6, 6));
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 6; ++x) EXPECT_EQ(t.mask.at<uint8_t>(y, x), cut[y / 2][x / 2]) << y << "," << x;
  }
  EXPECT_EQ(cv::countNonZero(t.mask != t.instance_masks[0]), 0);
}

// Issue 49: a pad in edge, reflect or symmetric mode pads the masks as it
// pads the pixels (it once padded them with zeros, class 0).
TEST(GeometryTest, PaddedMasksFollowTheImagesPaddingMode) {
  cv::Mat classes(3, 4, CV_8U);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 4; ++x) classes.at<uint8_t>(y, x) = static_cast<uint8_t>(1 + 10 * y + x);
  }
  const int kBorders[] = {cv::BORDER_CONSTANT, cv::BORDER_REPLICATE, cv::BORDER_REFLECT_101, cv::BORDER_REFLECT};
  for (int mode = 0; mode < 4; ++mode) {
    SampleTargets t;
    t.mask = classes.clone();
    t.instance_masks.push_back(classes.clone());
    t.boxes = {0, 0, 4, 3};
    // Left 2, top 1, right 3, bottom 2: the box (top, left, height, width).
    GeometryLog log{4, 3, {GeometryStep::Pad({-1, -2, 6, 9}, mode)}};
    ASSERT_TRUE(ApplyGeometry(log, {}, &t).ok());
    cv::Mat expected;
    cv::copyMakeBorder(classes, expected, 1, 2, 2, 3, kBorders[mode], cv::Scalar::all(0));
    ASSERT_EQ(t.mask.size(), cv::Size(9, 6)) << mode;
    EXPECT_EQ(cv::countNonZero(t.mask != expected), 0) << "mode " << mode;
    EXPECT_EQ(cv::countNonZero(t.instance_masks[0] != expected), 0) << "mode " << mode;
    // Only the constant mode writes class 0 into the border.
    EXPECT_EQ(static_cast<size_t>(cv::countNonZero(t.mask)) == t.mask.total(), mode != 0) << mode;
  }
}

// Issue 49: a point near float's limit scaled past it saturates (a cast of
// the double would be undefined behaviour).
TEST(GeometryTest, ScaledPointsPastFloatsRangeSaturate) {
  SampleTargets t;
  t.points_per_box = 1;
  t.boxes = {0, 0, 1, 1};
  t.keypoints = {3e38f, -3e38f, 2};
  GeometryLog log{10, 10, {GeometryStep::Resize(100, 100)}};
  ASSERT_TRUE(ApplyGeometry(log, {}, &t).ok());
  EXPECT_EQ(t.keypoints[0], std::numeric_limits<float>::max());
  EXPECT_EQ(t.keypoints[1], -std::numeric_limits<float>::max());
}

TEST(GeometryTest, AMaskOfAnotherSizeThanItsImageIsABadField) {
  SampleTargets t;
  t.mask = cv::Mat::zeros(4, 5, CV_8U);
  absl::Status s = ApplyGeometry(GeometryLog{6, 4, {}}, {}, &t);
  EXPECT_EQ(DecodeFailureOf(s), DecodeFailure::kBadField);
  EXPECT_NE(s.message().find("a mask of 5x4 does not match its image of 6x4"), std::string::npos) << s;
}

TEST(GeometryTest, CentreDropsOnlyWhereTheStepSaysSo) {
  // Box 1 keeps half its area in the crop, but its centre (65, 32) is below it.
  const std::vector<float> boxes = {0, 0, 50, 20, 60, 24, 70, 40};
  GeometryStep crop = GeometryStep::Crop({0, 0, 30, 100});
  SampleTargets plain;
  plain.boxes = boxes;
  ASSERT_TRUE(ApplyGeometry(GeometryLog{100, 100, {crop}}, {}, &plain).ok());
  EXPECT_EQ(plain.boxes, (std::vector<float>{0, 0, 50, 20, 60, 24, 70, 30}));
  crop.drop_outside_centers = true;
  SampleTargets centred;
  centred.boxes = boxes;
  ASSERT_TRUE(ApplyGeometry(GeometryLog{100, 100, {crop}}, {}, &centred).ok());
  EXPECT_EQ(centred.boxes, (std::vector<float>{0, 0, 50, 20}));
}

TEST(GeometryTest, MasksThatWouldGrowPastTheBoundStopTheSampleAndSizesMustMatch) {
  SampleTargets t;
  t.instance_masks.assign(3, cv::Mat::zeros(10, 10, CV_8U));
  t.boxes = {0, 0, 5, 5, 0, 0, 5, 5, 0, 0, 5, 5};
  GeometrySink sink;
  sink.targets = &t;
  ASSERT_TRUE(sink.Start(10, 10).ok());
  sink.Step(GeometryStep::Resize(10000, 10000));  // 3 x 100 MB > 256 MiB
  EXPECT_EQ(DecodeFailureOf(sink.status), DecodeFailure::kTooLarge) << sink.status;
  EXPECT_EQ(t.instance_masks[0].cols, 10);  // not applied
  SampleTargets annotated;
  annotated.source_width = 640;
  annotated.source_height = 480;
  GeometrySink other;
  other.targets = &annotated;
  const absl::Status s = other.Start(320, 240);
  EXPECT_EQ(DecodeFailureOf(s), DecodeFailure::kBadField);
  EXPECT_NE(s.message().find("annotations are for an image of 640x480; the image decodes to 320x240"),
            std::string::npos)
      << s;
}

TEST(GeometryTest, AKeypointOnTheFarEdgeStaysVisibleThroughAFlip) {
  SampleTargets t;
  t.boxes = {0, 0, 4, 4};
  t.points_per_box = 1;
  t.keypoints = {0, 2, 2};
  GeometryLog log{10, 8, {GeometryStep::FlipHorizontal(10, 8), GeometryStep::Crop({0, 0, 8, 10})}};
  ASSERT_TRUE(ApplyGeometry(log, {}, &t).ok());
  EXPECT_EQ(t.keypoints, (std::vector<float>{10, 2, 2}));
}

}  // namespace
}  // namespace stoker
