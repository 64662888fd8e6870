// Geometric ops: the warps' matrices and sampling on cases worked out by
// hand (torchvision itself is the reference in
// python/tests/test_augment_ops.py), and the ops that move targets moving
// them: pad shifts boxes, random_crop cuts them, vertical_flip mirrors them,
// and the warps (and the policies' warps) move boxes, masks and keypoints
// where the pixels went.
#include "dataplane/ops/geometric_ops.h"

#include <opencv2/imgproc.hpp>

#include "dataplane/ops/policy_ops.h"

#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
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

// Whole-pixel translations are copied, not sampled: the same bytes as the
// sampling path (forced here by a matrix that differs from 1 by less than a
// float can hold, so that the float grid is the same).
TEST(GeometricOpsTest, AWholePixelShiftCopiesWhatSamplingGives) {
  cv::Mat image(37, 53, CV_8UC3);
  cv::randu(image, 0, 256);
  for (const auto& [tx, ty] : {std::pair<double, double>{5, 0}, {-7, 3}, {0, -36}, {52, 1}, {-60, 0}, {0, 0}}) {
    for (bool bilinear : {false, true}) {
      for (bool masked : {false, true}) {
        const std::array<double, 6> shift = InverseAffineMatrix(0, tx, ty, 1, 0, 0);
        std::array<double, 6> sampled = shift;
        sampled[0] = 1 - 1e-12;  // 1.0f as a float: the sampling path's grid is the same
        const cv::Scalar fill(10, 200, 30);
        const cv::Mat fast = WarpAffine(image, shift, bilinear, fill, masked);
        const cv::Mat slow = WarpAffine(image, sampled, bilinear, fill, masked);
        EXPECT_EQ(cv::norm(fast, slow, cv::NORM_INF), 0)
            << "shift " << tx << "," << ty << " bilinear " << bilinear << " masked " << masked;
      }
    }
  }
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
    const OpEntry* entry = FindOp(op);
    ASSERT_NE(entry, nullptr);
    OpShape shape;
    ASSERT_TRUE(CheckOp(*entry, "op", op, &shape).ok());
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
  EXPECT_EQ(FindOp(v1::Op::kRotate)->targets, OpTargets::kMoved);
  EXPECT_EQ(FindOp(v1::Op::kAugmix)->targets, OpTargets::kRefused);
}

// A white rectangle on black with the rectangle as its box, mask, instance
// mask and two keypoints: after a warp (nearest, fill 0), the targets must
// be where the white pixels went.
struct Marked {
  cv::Mat image;
  SampleTargets targets;
};

Marked MarkedRectangle() {
  Marked m;
  m.image = cv::Mat(64, 80, CV_8UC3, cv::Scalar::all(0));
  const cv::Rect r(28, 20, 22, 16);  // x 28..50, y 20..36
  m.image(r).setTo(cv::Scalar::all(255));
  m.targets.boxes = {28, 20, 50, 36};
  m.targets.labels = {3};
  m.targets.crowd = {0};
  m.targets.points_per_box = 2;
  m.targets.keypoints = {39, 28, 2, 30.5f, 21.5f, 2};  // the centre and a point near the top-left corner
  m.targets.mask = cv::Mat::zeros(64, 80, CV_8U);
  m.targets.mask(r).setTo(1);
  m.targets.instance_masks = {m.targets.mask.clone()};
  return m;
}

void ExpectTargetsFollowThePixels(const Marked& m, const std::string& what) {
  cv::Mat white;
  cv::extractChannel(m.image, white, 0);
  white = white > 127;
  const int area = cv::countNonZero(white);
  ASSERT_GT(area, 100) << what << ": the rectangle left the image; pick another case";
  const cv::Rect bounds = cv::boundingRect(white);
  ASSERT_EQ(m.targets.num_boxes(), 1) << what;
  const std::vector<float>& b = m.targets.boxes;
  EXPECT_NEAR(b[0], bounds.x, 1.5) << what;
  EXPECT_NEAR(b[1], bounds.y, 1.5) << what;
  EXPECT_NEAR(b[2], bounds.x + bounds.width, 1.5) << what;
  EXPECT_NEAR(b[3], bounds.y + bounds.height, 1.5) << what;
  for (const cv::Mat& mask : {m.targets.mask, m.targets.instance_masks[0]}) {
    ASSERT_EQ(mask.size(), m.image.size()) << what;
    cv::Mat differ;
    cv::bitwise_xor(mask > 0, white, differ);
    EXPECT_LE(cv::countNonZero(differ), std::max(2, area / 50)) << what << ": the mask is not where the pixels are";
  }
  for (int k = 0; k < 2; ++k) {
    const float* kp = &m.targets.keypoints[static_cast<size_t>(3 * k)];
    ASSERT_EQ(kp[2], 2) << what << " keypoint " << k;
    EXPECT_EQ(white.at<uint8_t>(static_cast<int>(kp[1]), static_cast<int>(kp[0])), 255)
        << what << ": keypoint " << k << " at " << kp[0] << "," << kp[1] << " is not on the rectangle";
  }
}

TEST(GeometricOpsTest, WarpsMoveBoxesMasksAndKeypointsWithThePixels) {
  for (const std::string text :
       {"rotate(degrees=30:30)", "rotate(degrees=-75:-60)",
        "affine(degrees=-10:10, translate_x=0.1, translate_y=0.1, scale=0.8:1.1, shear_x=-15:15)",
        "affine(shear_y=20:20)", "perspective(p=1, distortion_scale=0.5)"}) {
    for (int seed = 0; seed < 6; ++seed) {
      Marked m = MarkedRectangle();
      Rng rng(static_cast<uint64_t>(seed));
      RunOps(text, m.image, &m.targets, rng);
      ExpectTargetsFollowThePixels(m, text + " seed " + std::to_string(seed));
    }
  }
}

TEST(GeometricOpsTest, ThePoliciesWarpsMoveTheTargetsToo) {
  using P = PolicyOp;
  for (const PolicyStep step :
       {PolicyStep{P::kShearX, 0.3}, PolicyStep{P::kShearY, -0.25}, PolicyStep{P::kTranslateX, 9.7},
        PolicyStep{P::kTranslateY, -6}, PolicyStep{P::kRotate, 25}}) {
    Marked m = MarkedRectangle();
    GeometrySink sink;
    sink.targets = &m.targets;
    ASSERT_TRUE(sink.Start(m.image.cols, m.image.rows).ok());
    ApplyPolicyOp(m.image, step, false, std::nullopt, &sink);
    ExpectTargetsFollowThePixels(m, std::string(PolicyOpName(step.op)));
  }
  // And a whole policy with targets runs (its photometric ops leave them).
  v1::SessionConfig c;
  c.set_batch_size(1);
  v1::FieldSpec* f = c.add_fields();
  f->set_name("boxes");
  f->set_kind(v1::BOXES);
  for (const char* text : {"rand_augment(2, 9)", "trivial_augment_wide()", "auto_augment()"}) {
    c.clear_pipeline();
    const absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(std::string(text) + ", center_crop(32)");
    ASSERT_TRUE(ops.ok()) << ops.status();
    for (const v1::Op& op : *ops) *c.add_pipeline() = op;
    const absl::StatusOr<Pipeline> p = Pipeline::Create(c);
    EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  }
  c.clear_pipeline();
  const absl::StatusOr<std::vector<v1::Op>> augmix = ParsePipelineText("augmix(), center_crop(32)");
  ASSERT_TRUE(augmix.ok()) << augmix.status();
  for (const v1::Op& op : *augmix) *c.add_pipeline() = op;
  const absl::StatusOr<Pipeline> refused = Pipeline::Create(c);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("augmix"), std::string::npos) << refused.status();
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
