// jpeg, the declared op with integer parameters: its text form and the
// integer type's messages, its defaults and ranges, its pair rule, that it
// draws only when random, its pixels (the codecs' round trip at the drawn
// quality) and its target rule (boxes untouched).
#include <cmath>
#include <set>

#include "dataplane/decode/image_codecs.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_test_util.h"
#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

cv::Mat Gradient() {
  cv::Mat m(32, 32, CV_8UC3);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 32; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(x * 8, (x * y) % 256, y % 2 ? 250 : 10);
  }
  return m;
}

cv::Mat RoundTrip(const cv::Mat& image, int quality) { return *DecodeImage(*EncodeJpeg(image, quality)); }

TEST(JpegTest, TheTextFormReadsIntegersAndRefusesAFraction) {
  absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText("jpeg(30, quality_max=60)");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ(PipelineToText(*ops), "jpeg(quality_min=30, quality_max=60)");
  EXPECT_EQ(ParsePipelineText("jpeg(30.5)").status().message(),
            "pipeline: jpeg.quality_min: '30.5' is not an integer; allowed range is 1..100");
  EXPECT_EQ(ParsePipelineText("jpeg(quality_max=high)").status().message(),
            "pipeline: jpeg.quality_max: 'high' is not an integer; allowed range is 1..100");
  // The grammar (and so the reference page) gives the type.
  bool listed = false;
  for (const OpGrammar& g : PipelineGrammar()) {
    if (g.name != "jpeg") continue;
    listed = true;
    ASSERT_EQ(g.arguments.size(), 2u);
    EXPECT_EQ(g.arguments[0].kind, "int");
    EXPECT_EQ(g.arguments[1].kind, "int");
  }
  EXPECT_TRUE(listed);
}

TEST(JpegTest, TheCheckFillsDefaultsAndRefusesWhatTheDeclarationDoesNotAllow) {
  v1::Op op = (*ParsePipelineText("jpeg()"))[0];
  OpShape shape;
  ASSERT_TRUE(CheckOp(*FindOp(op), "pipeline[0]", op, &shape).ok());
  EXPECT_EQ(PipelineToText({op}), "jpeg(quality_min=50, quality_max=95)");
  EXPECT_EQ(PipelineFromText("jpeg(0)").status().message(),
            "pipeline[0].jpeg.quality_min = 0; allowed range is 1..100");
  EXPECT_EQ(PipelineFromText("center_crop(8), jpeg(quality_max=101)").status().message(),
            "pipeline[1].jpeg.quality_max = 101; allowed range is 1..100");
  EXPECT_EQ(PipelineFromText("jpeg(90, 80)").status().message(), "pipeline[0].jpeg: quality_min 90 > quality_max 80");
  // A value from a message (not the text form) that is not whole: refused
  // before the pair rule compares it.
  v1::Op fraction = (*ParsePipelineText("jpeg()"))[0];
  fraction.mutable_declared()->set_values(0, 70.5);
  EXPECT_EQ(CheckOp(*FindOp(fraction), "p", fraction, &shape).message(),
            "p.jpeg.quality_min = 70.5 is not an integer; allowed range is 1..100");
}

TEST(JpegTest, ItDrawsOnlyWhenRandomAndMakesTheCodecsPixels) {
  const OpEntry* entry = FindDeclaredOp("jpeg");
  ASSERT_NE(entry, nullptr);
  EXPECT_FALSE(entry->random((*ParsePipelineText("jpeg(40, 40)"))[0]));
  EXPECT_TRUE(entry->random((*ParsePipelineText("jpeg(40, 41)"))[0]));
  absl::StatusOr<Pipeline> fixed = PipelineFromText("center_crop(32), jpeg(40, 40)");
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  Rng rng(9);
  absl::StatusOr<cv::Mat> out = fixed->Apply(Gradient(), rng);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(rng.Next(), Rng(9).Next()) << "one quality: nothing drawn";
  EXPECT_EQ(cv::norm(*out, RoundTrip(Gradient(), 40), cv::NORM_INF), 0);
  EXPECT_GT(cv::norm(*out, Gradient(), cv::NORM_INF), 0) << "compression changed nothing";
  // A range: the quality is drawn from the sample's generator, so the same
  // sample gives the same pixels, and it is one of the range's round trips.
  absl::StatusOr<Pipeline> ranged = PipelineFromText("center_crop(32), jpeg(5, 95)");
  ASSERT_TRUE(ranged.ok());
  Rng a(4), b(4);
  const cv::Mat x = *ranged->Apply(Gradient(), a), y = *ranged->Apply(Gradient(), b);
  EXPECT_EQ(cv::norm(x, y, cv::NORM_INF), 0);
  int matches = 0;
  for (int q = 5; q <= 95; ++q) matches += cv::norm(x, RoundTrip(Gradient(), q), cv::NORM_INF) == 0;
  EXPECT_GE(matches, 1);
  std::set<double> different;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    Rng r(seed);
    different.insert(cv::norm(*ranged->Apply(Gradient(), r), Gradient(), cv::NORM_L1));
  }
  EXPECT_GT(different.size(), 1u) << "the quality is drawn per sample";
}

TEST(JpegTest, BoxesStayWhereThePixelsAre) {
  EXPECT_EQ(FindDeclaredOp("jpeg")->targets, OpTargets::kUntouched);
  absl::StatusOr<std::vector<float>> boxes = BoxesAfter("center_crop(32), jpeg(20, 90)", Gradient());
  ASSERT_TRUE(boxes.ok()) << boxes.status();
  EXPECT_EQ(*boxes, (std::vector<float>{1, 2, 9, 10}));
}

}  // namespace
}  // namespace stoker
