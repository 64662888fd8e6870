// The profiler's choice, on given figures: weights parsed strictly, the
// split points enumerated, the Pareto front, and a recommendation that
// follows the weights.
#include "materialize/strategy.h"

#include <map>

#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

std::vector<v1::Op> Ops(const std::string& text) {
  absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(text);
  EXPECT_TRUE(ops.ok()) << ops.status();
  return ops.ok() ? *ops : std::vector<v1::Op>{};
}

Strategy Figures(const std::string& name, double offline, double storage, double rate) {
  Strategy s;
  s.name = name;
  s.offline_seconds = offline;
  s.storage_bytes = storage;
  s.images_per_worker_second = rate;
  return s;
}

// Figures shaped like the photo set's: the source is free offline and slow
// online, raw pixels fastest and largest, JPEG smallest.
std::vector<Strategy> PhotoLike() {
  return {Figures("source", 0, 110e6, 1300), Figures("resize(256) raw", 60, 265e6, 8600),
          Figures("resize(256) raw+zstd", 75, 185e6, 2900), Figures("resize(256) jpeg:90", 62, 22e6, 3300),
          Figures("resize(256) png", 200, 141e6, 700)};
}

TEST(WeightsTest, ParsesThreeNonNegativeNumbers) {
  absl::StatusOr<Weights> w = ParseWeights("0.5, 1,2");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->preprocessing, 0.5);
  EXPECT_EQ(w->storage, 1);
  EXPECT_EQ(w->throughput, 2);
  for (const char* bad : {"", "1,2", "1,2,3,4", "-1,0,1", "0,0,0", "a,b,c", "nan,0,1", "inf,0,1"}) {
    absl::StatusOr<Weights> w = ParseWeights(bad);
    ASSERT_FALSE(w.ok()) << bad;
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(w.status().message().find("preprocessing,storage,throughput"), std::string::npos);
  }
}

TEST(StrategyTest, SplitPointsAreTheDeterministicPrefixesWithEveryFormat) {
  EXPECT_EQ(DeterministicPrefixLength(Ops("resize(64), center_crop(56), random_horizontal_flip(0.5)")), 2u);
  EXPECT_EQ(DeterministicPrefixLength(Ops("random_resized_crop(224), resize(64)")), 0u);
  EXPECT_EQ(DeterministicPrefixLength(Ops("resize(64), center_crop(56), normalize()")), 3u);
  EXPECT_EQ(DeterministicPrefixLength(Ops("resize(64), random_horizontal_flip(0.5), normalize()")), 1u);

  absl::StatusOr<StoredFormat> raw = ParseStoredFormat("raw", "none"), jpeg = ParseStoredFormat("jpeg:90", "lz4");
  ASSERT_TRUE(raw.ok() && jpeg.ok());
  const std::vector<Strategy> s =
      EnumerateStrategies(Ops("resize(64), center_crop(56), random_horizontal_flip(0.5)"), {*raw, *jpeg});
  std::vector<std::string> names;
  for (const Strategy& x : s) names.push_back(x.name);
  EXPECT_EQ(names, (std::vector<std::string>{"source", "decoded raw", "decoded jpeg:90+lz4", "resize(64) raw",
                                             "resize(64) jpeg:90+lz4", "resize(64), center_crop(56) raw",
                                             "resize(64), center_crop(56) jpeg:90+lz4"}));
  EXPECT_FALSE(s[0].materialised);
  EXPECT_TRUE(s[1].materialised);
  EXPECT_TRUE(s[1].prefix.empty());
  EXPECT_EQ(s[6].prefix.size(), 2u);
  EXPECT_EQ(s[6].format.Name(), "jpeg:90+lz4");

  // A validation pipeline is deterministic throughout; after normalize only raw storage is tried.
  const std::vector<Strategy> v = EnumerateStrategies(Ops("resize(64), center_crop(56), normalize()"), {*raw, *jpeg});
  ASSERT_EQ(v.size(), 1u + 3 * 2 + 1);
  EXPECT_EQ(v.back().name, "resize(64), center_crop(56), normalize() raw");
}

TEST(StrategyTest, ParetoFrontHoldsWhatNothingBeatsOnEveryCost) {
  std::vector<Strategy> s = PhotoLike();
  s.push_back(Figures("dominated", 70, 270e6, 8000));     // raw beats it on all three
  s.push_back(Figures("tie with raw", 60, 265e6, 8600));  // equal is not beaten
  MarkParetoFront(s);
  std::map<std::string, bool> front;
  for (const Strategy& x : s) front[x.name] = x.pareto;
  EXPECT_TRUE(front["source"]);  // nothing is free offline but it
  EXPECT_TRUE(front["resize(256) raw"]);
  EXPECT_TRUE(front["resize(256) jpeg:90"]);
  EXPECT_TRUE(front["tie with raw"]);
  EXPECT_FALSE(front["dominated"]);
  EXPECT_FALSE(front["resize(256) raw+zstd"]);  // JPEG beats it on all three
  EXPECT_FALSE(front["resize(256) png"]);       // slower, larger and costlier than JPEG
}

TEST(StrategyTest, TheRecommendationFollowsTheWeights) {
  std::vector<Strategy> s = PhotoLike();
  EXPECT_EQ(s[Recommend(s, {0, 0, 1})].name, "resize(256) raw");
  for (const Strategy& x : s) {
    EXPECT_GE(x.score, 0);
    EXPECT_LE(x.score, 1);
  }
  EXPECT_EQ(s[Recommend(s, {0, 1, 0})].name, "resize(256) jpeg:90");
  EXPECT_EQ(s[Recommend(s, {1, 0, 0})].name, "source");
  // Throughput with some care for storage: JPEG's 3300 images/s at a
  // twelfth of raw's bytes outscores raw's 8600 once storage weighs as much.
  EXPECT_EQ(s[Recommend(s, {0, 1, 1})].name, "resize(256) jpeg:90");
  EXPECT_EQ(s[Recommend(s, {0, 1, 3})].name, "resize(256) raw");
}

TEST(StrategyTest, EqualFiguresScoreAlikeAndTheFasterWinsTies) {
  std::vector<Strategy> s = {Figures("a", 1, 100, 10), Figures("b", 1, 100, 20)};
  EXPECT_EQ(s[Recommend(s, {1, 1, 0})].name, "b");  // equal on what is weighed
  EXPECT_EQ(s[0].score, s[1].score);
}

}  // namespace
}  // namespace stoker
