// Photometric ops: exact results on values small enough to work out by
// hand, the probability gate (a deterministic op draws nothing, so the ops
// after it see the same random stream), and their place in pipelines:
// validated by name, stored by the materialiser only when deterministic.
// torchvision itself is the reference in python/tests/test_augment_ops.py.
#include "dataplane/ops/photometric_ops.h"

#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_test_util.h"
#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

cv::Mat Row(std::initializer_list<int> values) {
  cv::Mat m(1, static_cast<int>(values.size()) / 3, CV_8UC3);
  int i = 0;
  for (int v : values) m.data[i++] = static_cast<uint8_t>(v);
  return m;
}

std::vector<int> Values(const cv::Mat& m) { return std::vector<int>(m.data, m.data + m.total() * 3); }

TEST(PhotometricOpsTest, SolarizePosterizeAndInvertAreExact) {
  cv::Mat m = Row({0, 99, 100, 200, 255, 128});
  Solarize(m, 100);
  EXPECT_EQ(Values(m), (std::vector<int>{0, 99, 155, 55, 0, 127}));
  m = Row({0, 99, 100, 200, 255, 128});
  Posterize(m, 3);
  EXPECT_EQ(Values(m), (std::vector<int>{0, 96, 96, 192, 224, 128}));
  Invert(m);
  EXPECT_EQ(Values(m), (std::vector<int>{255, 159, 159, 63, 31, 127}));
}

TEST(PhotometricOpsTest, EqualizeSpreadsAHistogramAndAutocontrastStretchesEachChannel) {
  // 4096 pixels, red 10 + i % 4 (1024 each): step = 3072 / 255 = 12, lut[v] = (pixels below v + 6) / 12
  // (torchvision and PIL give the same).
  cv::Mat m(64, 64, CV_8UC3);
  for (int i = 0; i < 4096; ++i) m.at<cv::Vec3b>(i / 64, i % 64) = {static_cast<uint8_t>(10 + i % 4), 50, 200};
  cv::Mat e = m.clone();
  Equalize(e);
  EXPECT_EQ(e.at<cv::Vec3b>(0, 0)[0], 0);
  EXPECT_EQ(e.at<cv::Vec3b>(0, 1)[0], 85);
  EXPECT_EQ(e.at<cv::Vec3b>(0, 2)[0], 171);
  EXPECT_EQ(e.at<cv::Vec3b>(0, 3)[0], 255);
  EXPECT_EQ(e.at<cv::Vec3b>(0, 0)[1], 50);  // one value: nothing to spread
  Autocontrast(m);
  EXPECT_EQ(m.at<cv::Vec3b>(0, 0)[0], 0);
  EXPECT_EQ(m.at<cv::Vec3b>(0, 3)[0], 255);
  EXPECT_EQ(m.at<cv::Vec3b>(0, 1)[0], 85);   // (11 - 10) x 255 / 3
  EXPECT_EQ(m.at<cv::Vec3b>(0, 0)[2], 200);  // flat: kept
}

TEST(PhotometricOpsTest, SharpnessOfOneAndBlurOfOneTapAreTheIdentity) {
  cv::Mat m(9, 7, CV_8UC3);
  cv::randu(m, 0, 256);
  cv::Mat s = m.clone();
  AdjustSharpness(s, 1.0);
  EXPECT_EQ(cv::norm(s, m, cv::NORM_INF), 0);
  cv::Mat b = m.clone();
  GaussianBlur(b, 1, 0.8);
  EXPECT_EQ(cv::norm(b, m, cv::NORM_INF), 0);
  GaussianBlur(b, 5, 2.0);
  EXPECT_GT(cv::norm(b, m, cv::NORM_INF), 0);
}

absl::StatusOr<Pipeline> Make(const std::string& text) { return PipelineFromText(text); }

TEST(PhotometricOpsTest, ADeterministicOpDrawsNothingAndAGatedOneDrawsOnce) {
  cv::Mat image(8, 8, CV_8UC3, cv::Scalar(10, 20, 30));
  for (const char* text : {"center_crop(8), invert()", "center_crop(8), invert(p=1)", "center_crop(8)"}) {
    absl::StatusOr<Pipeline> p = Make(text);
    ASSERT_TRUE(p.ok()) << p.status();
    Rng rng(5);
    ASSERT_TRUE(p->Apply(image.clone(), rng).ok());
    EXPECT_EQ(rng.Next(), Rng(5).Next()) << text;
  }
  absl::StatusOr<Pipeline> gated = Make("center_crop(8), invert(p=0.5)");
  ASSERT_TRUE(gated.ok());
  Rng rng(5), reference(5);
  ASSERT_TRUE(gated->Apply(image.clone(), rng).ok());
  reference.Next();
  EXPECT_EQ(rng.Next(), reference.Next());
}

TEST(PhotometricOpsTest, OnlyDeterministicOpsMayBeStoredAndRangesAreNamed) {
  for (const char* text : {"adjust_brightness(1.2), equalize(), gaussian_blur(3, sigma=1:1), grayscale()"}) {
    absl::StatusOr<Pipeline> prefix = Pipeline::CreatePrefix(*ParsePipelineText(text));
    EXPECT_TRUE(prefix.ok()) << prefix.status();
  }
  for (const char* text : {"invert(p=0.5)", "gaussian_blur(3)", "random_grayscale()", "random_erasing()"}) {
    absl::StatusOr<Pipeline> prefix = Pipeline::CreatePrefix(*ParsePipelineText(text));
    EXPECT_TRUE(absl::IsInvalidArgument(prefix.status())) << text;
    EXPECT_NE(prefix.status().message().find("is random"), std::string::npos) << prefix.status();
  }
  const absl::StatusOr<Pipeline> bad = Make("center_crop(8), adjust_contrast(-1)");
  EXPECT_NE(bad.status().message().find("pipeline[1].adjust_contrast.factor = -1"), std::string::npos) << bad.status();
  ASSERT_NE(FindOp(v1::Op::kEqualize), nullptr);
  EXPECT_EQ(FindOp(v1::Op::kEqualize)->targets, OpTargets::kUntouched);
}

}  // namespace
}  // namespace stoker
