#include "client/programs/ladder.h"
#include "dataplane/ops/op_registry.h"

#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

std::vector<LadderStep> WithRates(std::vector<double> rates) {
  std::vector<LadderStep> steps = LadderSteps();
  for (size_t i = 0; i < steps.size(); ++i) steps[i].images_per_second = rates[i];
  return steps;
}

TEST(LadderTest, TheLargestDropNamesTheStageAndTheGain) {
  const LadderResult r = AnalyzeLadder(WithRates({5e7, 4800, 4500, 4400, 1100, 1000}), false);  // step 0: no step time
  EXPECT_EQ(r.bottleneck, "decode");  // raw-cached (decode added) falls from 4400 to 1100
  EXPECT_DOUBLE_EQ(r.current, 1000);
  // Decoding adds 1/1100 - 1/4400 s per image; without it: 1/(1/1000 - that).
  EXPECT_NEAR(r.without, 1 / (1 / 1000.0 - (1 / 1100.0 - 1 / 4400.0)), 1e-6);
  EXPECT_NEAR(r.steps[4].change, -0.75, 1e-9);
  EXPECT_NE(LadderTable(r).find("bottleneck: decode"), std::string::npos) << LadderTable(r);
  EXPECT_NE(LadderJson(r).find("\"bottleneck\": \"decode\""), std::string::npos);
  EXPECT_NE(LadderHtml(r, "t").find("<svg"), std::string::npos);
}

TEST(LadderTest, GainStaysPositiveWhenStepsDoNotSlowDownMonotonically) {
  // The decoded step slower than the raw one: augment's cost exceeds the full
  // pipeline's time per image.
  const LadderResult r = AnalyzeLadder(WithRates({10000, 5000, 2000, 500, 800, 700}), false);
  EXPECT_EQ(r.bottleneck, "augment");
  EXPECT_GT(r.without, r.current);
  EXPECT_LE(r.without, 10000);
}

TEST(LadderTest, SmallDropsMeanTheStepLimits) {
  const LadderResult r = AnalyzeLadder(WithRates({320, 318, 316, 315, 314, 312}), true);
  EXPECT_EQ(r.bottleneck, "none");
  ASSERT_EQ(r.caveats.size(), 2u);  // shared cores, cached samples
  EXPECT_NE(LadderTable(r).find("keeps up with the training step"), std::string::npos);
}

TEST(LadderTest, EachStepIsAttributedToWhatItAdds) {
  const std::vector<std::string> adds = {"step", "h2d", "network", "augment", "decode", "storage"};
  for (size_t i = 1; i < adds.size(); ++i) {
    std::vector<double> rates(6, 1000);
    for (size_t j = i; j < rates.size(); ++j) rates[j] = 300;
    EXPECT_EQ(AnalyzeLadder(WithRates(rates), false).bottleneck, adds[i]);
  }
}

// Issue 47: with a remote --data-root the ladder shows the store: the first
// epoch on a cold cache waits for the copy (here 10 s for 1,000 samples, on
// top of 1,000 images/s: 1/(1/1000 + 1/100) = 90.9 images/s). It is never
// the steady state's bottleneck, which stays decode.
TEST(LadderTest, TheColdCacheStepShowsTheStoreWithoutTakingTheVerdict) {
  std::vector<LadderStep> steps = WithRates({5e7, 4800, 4500, 4400, 1100, 1000});
  steps.push_back(ColdCacheStep(1000, 10, 1000));
  EXPECT_EQ(steps.back().adds, "store");
  EXPECT_NEAR(steps.back().images_per_second, 1 / (1 / 1000.0 + 1 / 100.0), 1e-9);
  const LadderResult r = AnalyzeLadder(steps, false);
  EXPECT_EQ(r.bottleneck, "decode");
  EXPECT_DOUBLE_EQ(r.current, 1000);
  EXPECT_NEAR(r.steps.back().change, 1000 / 11.0 / 1000 - 1, 1e-9);
  const std::string table = LadderTable(r);
  EXPECT_NE(table.find("cold cache (first epoch)"), std::string::npos) << table;
  EXPECT_NE(table.find("store (first epoch only; later epochs read the cache)"), std::string::npos) << table;
  EXPECT_NE(LadderJson(r).find("\"first_epoch_only\": true"), std::string::npos) << LadderJson(r);
}

TEST(LadderTest, CaveatInputsFromServersAndPipeline) {
  EXPECT_TRUE(ServersShareCores({"data-1:50051", "127.0.0.1:7000"}));
  EXPECT_TRUE(ServersShareCores({"localhost:1"}));
  EXPECT_TRUE(ServersShareCores({"[::1]:1"}));
  EXPECT_FALSE(ServersShareCores({"data-1:50051", "10.0.0.127:1"}));
  EXPECT_TRUE(StartsWithCrop(*ParsePipelineText("center_crop(224)")));
  EXPECT_TRUE(StartsWithCrop(*ParsePipelineText("random_resized_crop(224), random_horizontal_flip(0.5)")));
  EXPECT_FALSE(StartsWithCrop(*ParsePipelineText("resize(256), center_crop(224)")));
}

}  // namespace
}  // namespace stoker
