// Geometric ops: the warps' matrices and sampling on cases worked out by
// hand (torchvision itself is the reference in
// python/tests/test_augment_ops.py), and the ops that move targets moving
// them: pad shifts boxes, random_crop cuts them, vertical_flip mirrors them.
#include "dataplane/geometric_ops.h"

#include "common/pipeline_text.h"
#include "dataplane/image_decoder.h"
#include "dataplane/op_registry.h"
#include "dataplane/pipeline.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(GeometricOpsTest, TheIdentityWarpKeepsEveryPixel) {
  cv::Mat image(9, 13, CV_8UC3);
  cv::randu(image, 0, 256);
  for (bool bilinear : {false, true}) {
    EXPECT_EQ(cv::norm(WarpAffine(image, InverseAffineMatrix(0, 0, 0, 1, 0, 0), bilinear, cv::Scalar::all(0)), image,
                       cv::NORM_INF),
              0);
    const std::array<cv::Point2d, 4> corners = {cv::Point2d(0, 0), cv::Point2d(12, 0), cv::Point2d(12, 8),
                                                cv::Point2d(0, 8)};
    EXPECT_EQ(cv::norm(WarpPerspective(image, PerspectiveCoefficients(corners, corners), bilinear, cv::Scalar::all(0)),
                       image, cv::NORM_INF),
              0);
  }
}

TEST(GeometricOpsTest, AQuarterTurnAndATranslationMovePixelsWhereExpected) {
  cv::Mat image(4, 4, CV_8UC3, cv::Scalar::all(0));
  image.at<cv::Vec3b>(0, 3) = {9, 9, 9};  // top right
  // F.rotate(90) turns counter-clockwise: the top right goes to the top left.
  const cv::Mat turned = WarpAffine(image, InverseAffineMatrix(-90, 0, 0, 1, 0, 0), false, cv::Scalar::all(0));
  EXPECT_EQ(turned.at<cv::Vec3b>(0, 0)[0], 9);
  EXPECT_EQ(cv::countNonZero(turned.reshape(1)), 3);
  // Translated by one pixel right and one down; what comes in is the fill.
  const cv::Mat moved = WarpAffine(image, InverseAffineMatrix(0, -1, 1, 1, 0, 0), false, cv::Scalar::all(5));
  EXPECT_EQ(moved.at<cv::Vec3b>(1, 2)[0], 9);
  EXPECT_EQ(moved.at<cv::Vec3b>(0, 0)[0], 5);
}

TEST(GeometricOpsTest, PaddingModesAreTorchvisions) {
  cv::Mat row(1, 3, CV_8UC3);
  for (int x = 0; x < 3; ++x) row.at<cv::Vec3b>(0, x) = cv::Vec3b::all(static_cast<uint8_t>(x + 1));
  auto left = [&](int mode) {
    const cv::Mat p = PadImage(row, 2, 0, 0, 0, mode, cv::Scalar::all(7));
    return std::vector<int>{p.at<cv::Vec3b>(0, 0)[0], p.at<cv::Vec3b>(0, 1)[0]};
  };
  EXPECT_EQ(left(0), (std::vector<int>{7, 7}));  // constant
  EXPECT_EQ(left(1), (std::vector<int>{1, 1}));  // edge
  EXPECT_EQ(left(2), (std::vector<int>{3, 2}));  // reflect: 3 2 | 1 2 3
  EXPECT_EQ(left(3), (std::vector<int>{2, 1}));  // symmetric: 2 1 | 1 2 3
  EXPECT_EQ(PaddingSides({1, 2}), (std::array<int, 4>{1, 2, 1, 2}));
}

void RunOps(const std::string& text, cv::Mat& image, SampleTargets* targets, Rng& rng) {
  const absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(text);
  ASSERT_TRUE(ops.ok()) << ops.status();
  GeometrySink sink;
  sink.targets = targets;
  ASSERT_TRUE(sink.Start(image.cols, image.rows).ok());
  for (v1::Op op : *ops) {
    const OpEntry* entry = FindOp(op.op_case());
    ASSERT_NE(entry, nullptr);
    OpShape shape;
    ASSERT_TRUE(entry->check("op", op, &shape).ok());
    entry->apply(op, image, rng, OpContext{}, &sink);
  }
  ASSERT_TRUE(sink.status.ok());
}

TEST(GeometricOpsTest, PadCropAndFlipMoveTheBoxes) {
  cv::Mat image(20, 30, CV_8UC3, cv::Scalar::all(1));
  SampleTargets t;
  t.boxes = {2, 3, 12, 8};
  t.labels = {4};
  t.crowd = {0};
  Rng rng(1);
  RunOps("pad(padding=5:1), vertical_flip()", image, &t, rng);
  ASSERT_EQ(image.size(), cv::Size(40, 22));
  EXPECT_EQ(t.boxes, (std::vector<float>{7, 22 - 9, 17, 22 - 4}));  // shifted by (5, 1), then mirrored
  SampleTargets c;
  c.boxes = {0, 0, 30, 20};
  c.labels = {1};
  c.crowd = {0};
  cv::Mat small(20, 30, CV_8UC3, cv::Scalar::all(1));
  RunOps("random_crop(10)", small, &c, rng);
  ASSERT_EQ(small.size(), cv::Size(10, 10));
  EXPECT_EQ(c.boxes, (std::vector<float>{0, 0, 10, 10}));  // the whole image's box, cut to the crop
  EXPECT_EQ(FindOp(v1::Op::kRotate)->targets, OpTargets::kRefused);
}

TEST(GeometricOpsTest, APaddingPastThePixelLimitFailsTheSampleBeforeAllocating) {
  v1::SessionConfig c;
  c.set_batch_size(1);
  const absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText("pad(8000), center_crop(16)");
  for (const v1::Op& op : *ops) *c.add_pipeline() = op;
  const absl::StatusOr<Pipeline> p = Pipeline::Create(c);
  ASSERT_TRUE(p.ok()) << p.status();
  Rng rng(1);
  const absl::StatusOr<cv::Mat> out = p->Apply(cv::Mat(20, 20, CV_8UC3, cv::Scalar::all(1)), rng, 0, 1'000'000);
  EXPECT_EQ(DecodeFailureOf(out.status()), DecodeFailure::kTooLarge) << out.status();
  EXPECT_NE(out.status().message().find("would make 16020x16020 pixels"), std::string::npos) << out.status();
  EXPECT_EQ(PaddedSize(*ParsePipelineText("random_crop(64, padding=2)")->begin(), {20, 30}), cv::Size(64, 64));
}

}  // namespace
}  // namespace stoker
