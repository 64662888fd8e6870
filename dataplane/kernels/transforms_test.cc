#include "dataplane/kernels/transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

// An image whose pixel (y, x) has all channels y * 10 + x.
cv::Mat Ramp(int h, int w) {
  cv::Mat m(h, w, CV_8UC3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) m.at<cv::Vec3b>(y, x) = cv::Vec3b::all(static_cast<uint8_t>(y * 10 + x));
  }
  return m;
}

int At(const cv::Mat& m, int y, int x, int c = 0) { return m.at<cv::Vec3b>(y, x)[c]; }

TEST(TransformsTest, FlipMirrorsColumnsKeepingChannelOrder) {
  cv::Mat m(1, 3, CV_8UC3);
  m.at<cv::Vec3b>(0, 0) = {1, 2, 3};
  m.at<cv::Vec3b>(0, 1) = {4, 5, 6};
  m.at<cv::Vec3b>(0, 2) = {7, 8, 9};
  FlipHorizontalInPlace(m);
  EXPECT_EQ(m.at<cv::Vec3b>(0, 0), cv::Vec3b(7, 8, 9));
  EXPECT_EQ(m.at<cv::Vec3b>(0, 1), cv::Vec3b(4, 5, 6));
  EXPECT_EQ(m.at<cv::Vec3b>(0, 2), cv::Vec3b(1, 2, 3));
}

TEST(TransformsTest, CenterCropRoundsHalvesToEvenLikePython) {
  // left = round((7 - 2) / 2) = round(2.5) = 2 in Python; top = round(1.0) = 1.
  cv::Mat out = CenterCrop(Ramp(4, 7), 2);
  ASSERT_EQ(out.size(), cv::Size(2, 2));
  EXPECT_EQ(At(out, 0, 0), 12);
  EXPECT_EQ(At(out, 0, 1), 13);
  EXPECT_EQ(At(out, 1, 0), 22);
  EXPECT_EQ(At(out, 1, 1), 23);
}

TEST(TransformsTest, CenterCropPadsSmallImagesWithZeros) {
  cv::Mat one(1, 1, CV_8UC3, cv::Scalar::all(200));
  cv::Mat out = CenterCrop(one, 3);
  ASSERT_EQ(out.size(), cv::Size(3, 3));
  EXPECT_EQ(At(out, 1, 1), 200);
  EXPECT_EQ(At(out, 0, 0), 0);
  EXPECT_EQ(At(out, 2, 2), 0);
}

TEST(TransformsTest, ResizeShorterSideKeepsAspect) {
  EXPECT_EQ(ResizeShorterSide(Ramp(100, 200), 50).size(), cv::Size(100, 50));
  EXPECT_EQ(ResizeShorterSide(Ramp(300, 100), 50).size(), cv::Size(50, 150));
  EXPECT_EQ(ResizeShorterSide(Ramp(375, 500), 256).size(), cv::Size(341, 256));  // int(256*500/375)
}

TEST(TransformsTest, ResizedCropOfSameSizeBoxIsTheBox) {
  cv::Mat out = ResizedCrop(Ramp(6, 6), CropBox{1, 2, 3, 3}, 3);
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 3; ++x) EXPECT_EQ(At(out, y, x), (y + 1) * 10 + x + 2);
  }
}

TEST(TransformsTest, RandomResizedCropBoxRespectsScaleRatioAndBounds) {
  Rng rng(3);
  for (int i = 0; i < 500; ++i) {
    const CropBox b = RandomResizedCropBox(375, 500, 0.08, 1.0, 3.0 / 4, 4.0 / 3, rng);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, 375);
    ASSERT_LE(b.left + b.width, 500);
    const double area = static_cast<double>(b.height) * b.width / (375.0 * 500.0);
    EXPECT_GE(area, 0.07);  // rounding to whole pixels moves it a little
    EXPECT_LE(area, 1.0);
    const double ratio = static_cast<double>(b.width) / b.height;
    EXPECT_GT(ratio, 0.70);
    EXPECT_LT(ratio, 1.40);
  }
}

TEST(TransformsTest, RandomResizedCropFallsBackToCentralBoxClampedToRatio) {
  // A 100x100 image cannot hold a full-area box of ratio >= 2, so all ten tries
  // fail: torchvision then takes w = 100, h = round(100 / 2) = 50, centred.
  Rng rng(1);
  EXPECT_EQ(RandomResizedCropBox(100, 100, 1.0, 1.0, 2.0, 3.0, rng), (CropBox{25, 0, 50, 100}));
  // Ratio below range on a wide image: h = 100, w = round(100 * 0.5) = 50.
  EXPECT_EQ(RandomResizedCropBox(100, 400, 1.0, 1.0, 0.25, 0.5, rng), (CropBox{0, 175, 100, 50}));
  // 60 wide, 50 tall, ratio at most 0.6: h = 50, w = round(50 * 0.6) = 30, centred.
  EXPECT_EQ(RandomResizedCropBox(50, 60, 1.0, 1.0, 0.5, 0.6, rng), (CropBox{0, 15, 50, 30}));
}

TEST(TransformsTest, RandomResizedCropBoxIsDeterministicPerGenerator) {
  Rng a = Rng::ForSample(1, 2, 3), b = Rng::ForSample(1, 2, 3);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(RandomResizedCropBox(300, 400, 0.08, 1, 0.75, 4.0 / 3, a),
              RandomResizedCropBox(300, 400, 0.08, 1, 0.75, 4.0 / 3, b));
  }
}

TEST(TransformsTest, ExtremeRatiosNeverGiveAnEmptyBox) {
  Rng rng(4);
  const CropBox tall = RandomResizedCropBox(375, 500, 1.0, 1.0, 100, 100, rng);
  EXPECT_GE(tall.height, 1);
  EXPECT_GE(tall.width, 1);
  const CropBox thin = RandomResizedCropBox(1, 500, 1.0, 1.0, 0.01, 0.02, rng);
  EXPECT_GE(thin.width, 1);
  EXPECT_EQ(thin.height, 1);
}

TEST(TransformsTest, RatioIsLogUniform) {
  // Log-uniform on [1/2, 2] has median 1; uniform would have median 1.25.
  Rng rng(5);
  std::vector<double> ratios;
  for (int i = 0; i < 2000; ++i) {
    const CropBox b = RandomResizedCropBox(1000, 1000, 0.05, 0.1, 0.5, 2.0, rng);
    ratios.push_back(static_cast<double>(b.width) / b.height);
  }
  std::nth_element(ratios.begin(), ratios.begin() + 1000, ratios.end());
  EXPECT_NEAR(ratios[1000], 1.0, 0.06);
}

TEST(TransformsTest, ColorAdjustmentsOnKnownPixels) {
  cv::Mat img(1, 2, CV_8UC3);
  img.at<cv::Vec3b>(0, 0) = {100, 50, 0};
  img.at<cv::Vec3b>(0, 1) = {200, 250, 10};
  cv::Mat b = img.clone();
  AdjustBrightness(b, 1.5);
  EXPECT_EQ(b.at<cv::Vec3b>(0, 0), cv::Vec3b(150, 75, 0));
  EXPECT_EQ(b.at<cv::Vec3b>(0, 1), cv::Vec3b(255, 255, 15));  // clamped

  // Saturation 0 gives the grayscale in every channel.
  cv::Mat s = img.clone();
  AdjustSaturation(s, 0.0);
  const int g0 = static_cast<int>(0.2989f * 100 + 0.587f * 50);  // truncated, as torchvision
  EXPECT_EQ(s.at<cv::Vec3b>(0, 0), cv::Vec3b::all(static_cast<uint8_t>(g0)));

  // Contrast 0 gives the mean of the grayscale everywhere.
  cv::Mat c = img.clone();
  AdjustContrast(c, 0.0);
  const cv::Mat gray = Grayscale(img);
  const double mean = (gray.at<uint8_t>(0, 0) + gray.at<uint8_t>(0, 1)) / 2.0;
  EXPECT_EQ(c.at<cv::Vec3b>(0, 1), cv::Vec3b::all(static_cast<uint8_t>(mean)));

  // Half a turn of hue takes red to cyan.
  cv::Mat red(1, 1, CV_8UC3, cv::Scalar(255, 0, 0));
  AdjustHue(red, 0.5);
  EXPECT_EQ(red.at<cv::Vec3b>(0, 0), cv::Vec3b(0, 255, 255));
}

}  // namespace
}  // namespace stoker
