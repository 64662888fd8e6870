// Random erasing's box: the sizes torchvision's get_params gives for the
// drawn area and ratio, inside the image, none when no try fits; its noise
// is standard normal.
#include "dataplane/ops/erasing_ops.h"

#include <cmath>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(ErasingOpsTest, BoxesHaveTheDrawnAreaAndRatioAndFitInside) {
  Rng rng(3);
  double total = 0;
  const int n = 2000;
  for (int i = 0; i < n; ++i) {
    const std::optional<CropBox> b = RandomErasingBox(100, 150, 0.02, 0.33, 0.3, 3.3, rng);
    ASSERT_TRUE(b.has_value());
    EXPECT_GE(b->top, 0);
    EXPECT_GE(b->left, 0);
    EXPECT_LT(b->height, 100);
    EXPECT_LT(b->width, 150);
    EXPECT_LE(b->top + b->height, 100);
    EXPECT_LE(b->left + b->width, 150);
    total += static_cast<double>(b->height) * b->width / (100.0 * 150);
  }
  EXPECT_NEAR(total / n, (0.02 + 0.33) / 2, 0.02);  // fits almost always: the area's mean
  Rng fixed(4);
  const std::optional<CropBox> square = RandomErasingBox(48, 48, 0.25, 0.25, 1, 1, fixed);
  ASSERT_TRUE(square.has_value());
  EXPECT_EQ(square->height, 24);
  EXPECT_EQ(square->width, 24);
  Rng whole(5);
  EXPECT_FALSE(RandomErasingBox(10, 10, 1, 1, 1, 1, whole).has_value());  // h < height never holds
}

TEST(ErasingOpsTest, NoiseIsStandardNormal) {
  Rng rng(7);
  double sum = 0, squares = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = StandardNormal(rng);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    squares += z * z;
  }
  EXPECT_NEAR(sum / n, 0, 0.01);
  EXPECT_NEAR(squares / n, 1, 0.02);
}

}  // namespace
}  // namespace stoker
