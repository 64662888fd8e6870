// random_sharpness, the declared op: read and printed by the text form from
// its declaration, its ranges and defaults checked and filled by CheckOp,
// its pair rule, its randomness, its pixels (adjust_sharpness at the drawn
// factor) and its target rule (boxes untouched), all from its one file.
#include <cmath>

#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/photometric_ops.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_test_util.h"
#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

absl::StatusOr<Pipeline> Make(const std::string& text) { return PipelineFromText(text); }

cv::Mat Stripes() {
  cv::Mat m(16, 16, CV_8UC3);
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b(x % 2 ? 200 : 40, 90, y * 10);
  }
  return m;
}

TEST(RandomSharpnessTest, TheTextFormReadsItsDeclarationAndPrintsWhatIsSet) {
  absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText("random_sharpness(0.2, p=1)");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ((*ops)[0].op_case(), v1::Op::kDeclared);
  EXPECT_EQ((*ops)[0].declared().name(), "random_sharpness");
  EXPECT_EQ(PipelineToText(*ops), "random_sharpness(lo=0.2, p=1)");
  EXPECT_EQ(PipelineToText(*ParsePipelineText(PipelineToText(*ops))), PipelineToText(*ops));
  EXPECT_EQ(ParsePipelineText("random_sharpness(low=1)").status().message(),
            "pipeline: random_sharpness has no argument 'low'; it takes lo, hi, p");
  EXPECT_EQ(ParsePipelineText("random_sharpness(1, 2, 0.5, 4)").status().message(),
            "pipeline: random_sharpness takes at most 3 arguments");
  EXPECT_EQ(ParsePipelineText("random_sharpness(hi=big)").status().message(),
            "pipeline: random_sharpness.hi: 'big' is not a finite number; allowed range is 0..1000");
  // NaN would read as "the default": refused as the text of any value.
  EXPECT_EQ(ParsePipelineText("random_sharpness(p=nan)").status().message(),
            "pipeline: random_sharpness.p: 'nan' is not a finite number; allowed range is 0..1");
  EXPECT_NE(ParsePipelineText("no_such_op()").status().message().find("random_sharpness"), std::string::npos);
}

TEST(RandomSharpnessTest, TheCheckFillsDefaultsAndRefusesWhatTheDeclarationDoesNotAllow) {
  v1::Op op = (*ParsePipelineText("random_sharpness(hi=3)"))[0];
  OpShape shape;
  ASSERT_TRUE(CheckOp(*FindOp(op), "pipeline[0]", op, &shape).ok());
  EXPECT_EQ(PipelineToText({op}), "random_sharpness(lo=0.5, hi=3, p=0.5)");
  EXPECT_EQ(Make("random_sharpness(hi=1001)").status().message(),
            "pipeline[0].random_sharpness.hi = 1001; allowed range is 0..1000");
  EXPECT_EQ(Make("center_crop(8), random_sharpness(p=1.5)").status().message(),
            "pipeline[1].random_sharpness.p = 1.5; allowed range is 0..1");
  EXPECT_EQ(Make("random_sharpness(3, 2)").status().message(), "pipeline[0].random_sharpness: lo 3 > hi 2");
  v1::Op extra = op;
  extra.mutable_declared()->add_values(1);
  EXPECT_EQ(CheckOp(*FindOp(extra), "p", extra, &shape).message(), "p.random_sharpness has 4 values; it takes 3");
  v1::Op unknown;
  unknown.mutable_declared()->set_name("sharpest");
  EXPECT_EQ(FindOp(unknown), nullptr);
  v1::SessionConfig c;
  c.set_batch_size(1);
  *c.add_pipeline() = unknown;
  EXPECT_NE(Pipeline::Create(c).status().message().find("unknown op 'sharpest'"), std::string::npos);
}

TEST(RandomSharpnessTest, ItDrawsOnlyWhenRandomAndMakesAdjustSharpnessPixels) {
  EXPECT_TRUE(FindDeclaredOp("random_sharpness")->random((*ParsePipelineText("random_sharpness(2, 2, p=0.5)"))[0]));
  // p = 1 and one factor: deterministic, drawing nothing.
  absl::StatusOr<Pipeline> fixed = Make("center_crop(16), random_sharpness(2, 2, p=1)");
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  Rng rng(9);
  absl::StatusOr<cv::Mat> out = fixed->Apply(Stripes(), rng);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(rng.Next(), Rng(9).Next());
  cv::Mat expected = Stripes();
  AdjustSharpness(expected, 2);
  EXPECT_EQ(cv::norm(*out, expected, cv::NORM_INF), 0);
  // A range: the factor is drawn from the sample's generator, so the same sample gives the same pixels.
  absl::StatusOr<Pipeline> ranged = Make("center_crop(16), random_sharpness(0, 3, p=1)");
  ASSERT_TRUE(ranged.ok());
  Rng a(4), b(4), c(5);
  const cv::Mat x = *ranged->Apply(Stripes(), a), y = *ranged->Apply(Stripes(), b), z = *ranged->Apply(Stripes(), c);
  EXPECT_EQ(cv::norm(x, y, cv::NORM_INF), 0);
  EXPECT_GT(cv::norm(x, z, cv::NORM_INF), 0);
  EXPECT_NE(a.Next(), Rng(4).Next());
}

TEST(RandomSharpnessTest, BoxesStayWhereThePixelsAre) {
  const OpEntry* entry = FindDeclaredOp("random_sharpness");
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->targets, OpTargets::kUntouched);
  absl::StatusOr<std::vector<float>> boxes = BoxesAfter("center_crop(16), random_sharpness(0.5, 2, p=1)", Stripes());
  ASSERT_TRUE(boxes.ok()) << boxes.status();
  EXPECT_EQ(*boxes, (std::vector<float>{1, 2, 9, 10}));
}

}  // namespace
}  // namespace stoker
