#include "server/image_decoder.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "gtest/gtest.h"
#include "tests/testdata/image_set.h"

namespace stoker {
namespace {

using ::stoker::testing::EncodeJpeg;
using ::stoker::testing::SyntheticImage;

TEST(ImageDecoderTest, JpegDecodesToRgbCloseToSource) {
  const cv::Mat src = SyntheticImage(60, 80, 1);
  auto rgb = DecodeImage(EncodeJpeg(src, 95));
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  ASSERT_EQ(rgb->type(), CV_8UC3);
  ASSERT_EQ(rgb->size(), src.size());
  EXPECT_LT(cv::norm(*rgb, src, cv::NORM_L1) / src.total() / 3, 12.0);  // grain is lossy
}

TEST(ImageDecoderTest, JpegChannelsComeOutInRgbOrder) {
  const cv::Mat src(32, 32, CV_8UC3, cv::Scalar(200, 60, 10));  // R, G, B
  auto rgb = DecodeImage(EncodeJpeg(src, 95));
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  const cv::Vec3b px = rgb->at<cv::Vec3b>(16, 16);
  EXPECT_NEAR(px[0], 200, 4);
  EXPECT_NEAR(px[1], 60, 4);
  EXPECT_NEAR(px[2], 10, 4);
}

TEST(ImageDecoderTest, PngIsLosslessAndDetectedFromBytes) {
  const cv::Mat src = SyntheticImage(20, 30, 2);
  cv::Mat bgr;
  cv::cvtColor(src, bgr, cv::COLOR_RGB2BGR);
  std::vector<uint8_t> png;
  cv::imencode(".png", bgr, png);
  auto rgb = DecodeImage(std::string(png.begin(), png.end()));
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(cv::norm(*rgb, src, cv::NORM_INF), 0);
  EXPECT_FALSE(LooksLikeJpeg(std::string(png.begin(), png.end())));
}

TEST(ImageDecoderTest, GrayscaleJpegComesOutAsRgb) {
  cv::Mat gray(16, 16, CV_8UC1, cv::Scalar(90));
  std::vector<uint8_t> buf;
  cv::imencode(".jpg", gray, buf);
  auto rgb = DecodeImage(std::string(buf.begin(), buf.end()));
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(rgb->channels(), 3);
  EXPECT_NEAR(rgb->at<cv::Vec3b>(8, 8)[0], 90, 2);
}

TEST(ImageDecoderTest, BadBytesGiveInvalidArgument) {
  const std::string jpeg = EncodeJpeg(SyntheticImage(40, 40, 3), 90);
  const std::string cases[] = {"", "hello, not an image", std::string("\xFF\xD8\xFF\x00garbage", 11),
                               jpeg.substr(0, 20)};
  for (const std::string& bytes : cases) {
    auto rgb = DecodeImage(bytes);
    EXPECT_FALSE(rgb.ok()) << "size " << bytes.size();
    EXPECT_EQ(rgb.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(ImageDecoderTest, TruncatedJpegBodyDoesNotCrash) {
  const std::string jpeg = EncodeJpeg(SyntheticImage(64, 64, 4), 90);
  auto rgb = DecodeImage(jpeg.substr(0, jpeg.size() / 2));
  // libjpeg-turbo pads a truncated scan; either result is fine, a crash is not.
  if (rgb.ok()) {
    EXPECT_EQ(rgb->size(), cv::Size(64, 64));
  }
}

}  // namespace
}  // namespace stoker
