// The antialiased resample: a flat image stays flat, a pattern finer than the
// output is averaged rather than aliased, the weights are PIL's (a 2:1
// shrink of a row is the mean of each pixel's neighbourhood with weights
// 1/8, 3/8, 3/8, 1/8), and without antialias (or when enlarging) it is
// OpenCV's resize byte for byte. PIL and torchvision themselves are the
// references in python/tests/test_antialias.py.
#include "dataplane/kernels/resample.h"

#include <opencv2/imgproc.hpp>

#include "gtest/gtest.h"
#include "tests/testdata/image_set.h"

namespace stoker {
namespace {

TEST(ResampleTest, AFlatImageStaysFlatAtEveryScale) {
  const cv::Mat flat(97, 131, CV_8UC3, cv::Scalar(12, 200, 77));
  for (cv::Size size : {cv::Size(13, 9), cv::Size(64, 97), cv::Size(131, 40), cv::Size(1, 1)}) {
    for (int interpolation : {0, 2}) {
      const cv::Mat out = Resample(flat, size, interpolation, true);
      ASSERT_EQ(out.size(), size);
      EXPECT_EQ(cv::norm(out, cv::Mat(size, CV_8UC3, cv::Scalar(12, 200, 77)), cv::NORM_INF), 0)
          << size << " " << interpolation;
    }
  }
}

TEST(ResampleTest, AHalvingWeighsFourNeighboursAsPil) {
  // Row values 0, 40, 80, ...: output pixel o is centred at input 2o + 1
  // (edges at 2o and 2o + 2), and reads inputs 2o - 1 .. 2o + 2 with weights
  // 1/8, 3/8, 3/8, 1/8 (renormalised at the border).
  cv::Mat row(1, 8, CV_8UC1);
  for (int x = 0; x < 8; ++x) row.at<uint8_t>(0, x) = static_cast<uint8_t>(40 * x);
  const cv::Mat out = Resample(row, cv::Size(4, 1), 0, true);
  EXPECT_EQ(out.at<uint8_t>(0, 0), 29);   // the border: (3 x 0 + 3 x 40 + 80) / 7 = 28.6, rounded
  EXPECT_EQ(out.at<uint8_t>(0, 1), 100);  // (40 + 3 x 80 + 3 x 120 + 160) / 8
  EXPECT_EQ(out.at<uint8_t>(0, 2), 180);
}

TEST(ResampleTest, StripesFinerThanTheOutputAreAveragedNotAliased) {
  cv::Mat stripes(64, 64, CV_8UC3);
  for (int x = 0; x < 64; ++x) stripes.col(x).setTo(cv::Scalar::all(x % 2 == 0 ? 0 : 240));
  const cv::Mat smooth = Resample(stripes, cv::Size(20, 20), 0, true);
  double lo = 0, hi = 0;
  cv::minMaxLoc(smooth.reshape(1), &lo, &hi);
  EXPECT_GE(lo, 90);  // every output pixel is a blend of both stripes
  EXPECT_LE(hi, 150);
  const cv::Mat sharp = Resample(stripes, cv::Size(20, 20), 0, false);
  cv::minMaxLoc(sharp.reshape(1), &lo, &hi);
  EXPECT_GT(hi - lo, 100);  // OpenCV's four-pixel bilinear aliases
}

TEST(ResampleTest, WithoutAntialiasOrWhenEnlargingItIsOpenCvsResize) {
  const cv::Mat image = testing::SyntheticImage(75, 101, 5);
  for (int interpolation : {0, 1, 2}) {
    for (cv::Size size : {cv::Size(40, 30), cv::Size(160, 120)}) {
      cv::Mat expected;
      const int flag = interpolation == 1 ? cv::INTER_NEAREST : interpolation == 2 ? cv::INTER_CUBIC : cv::INTER_LINEAR;
      cv::resize(image, expected, size, 0, 0, flag);
      const bool antialias = size.width > image.cols || interpolation == 1;  // nothing to antialias
      EXPECT_EQ(cv::norm(Resample(image, size, interpolation, false), expected, cv::NORM_INF), 0);
      if (antialias) EXPECT_EQ(cv::norm(Resample(image, size, interpolation, true), expected, cv::NORM_INF), 0);
    }
  }
}

TEST(ResampleTest, TheAvx2SumsGiveThePlainSumsBytes) {
  // Widths that leave tails of every length after the 32-byte blocks, both
  // filters, shrinking along one axis and both.
  cv::RNG rng(7);
  for (const cv::Size in : {cv::Size(301, 217), cv::Size(97, 131), cv::Size(640, 480)}) {
    cv::Mat image(in, CV_8UC3);
    rng.fill(image, cv::RNG::UNIFORM, 0, 256);
    for (const cv::Size out :
         {cv::Size(224, 224), cv::Size(in.width / 3, in.height), cv::Size(in.width, in.height / 2), cv::Size(37, 61)}) {
      if (out.width > in.width || out.height > in.height) continue;
      for (int interpolation : {0, 2}) {
        SetResampleSimdForTesting(false);
        const cv::Mat plain = Resample(image, out, interpolation, true);
        SetResampleSimdForTesting(true);
        const cv::Mat fast = Resample(image, out, interpolation, true);
        ASSERT_EQ(fast.size(), out);
        EXPECT_EQ(cv::norm(plain, fast, cv::NORM_INF), 0) << in << " -> " << out << " interpolation " << interpolation;
      }
    }
  }
}

}  // namespace
}  // namespace stoker
