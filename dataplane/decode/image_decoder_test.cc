#include "dataplane/decode/image_decoder.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "gtest/gtest.h"
#include "tests/testdata/image_set.h"

namespace stoker {
namespace {

using ::stoker::testing::EncodeJpeg;
using ::stoker::testing::SyntheticImage;

double MeanAbsDiff(const cv::Mat& a, const cv::Mat& b) {
  return cv::norm(a, b, cv::NORM_L1) / static_cast<double>(a.total() * a.channels());
}

std::string Encode(const char* ext, const cv::Mat& rgb) {
  cv::Mat bgr;
  const bool gray = std::string(ext) == ".pgm" || std::string(ext) == ".pbm";
  cv::cvtColor(rgb, bgr, gray ? cv::COLOR_RGB2GRAY : cv::COLOR_RGB2BGR);
  std::vector<uint8_t> out;
  EXPECT_TRUE(cv::imencode(ext, bgr, out)) << ext;
  return std::string(out.begin(), out.end());
}

// Review 1.11: the size of BMP/PNM/TIFF was learnt by decoding the whole
// image, with no limit. It now comes from the header, for every format.
TEST(ImageDecoderTest, OtherFormatsAreSizedFromTheirHeaders) {
  const cv::Mat src = SyntheticImage(21, 34, 3);
  for (const char* ext : {".bmp", ".ppm", ".pgm", ".tiff", ".pbm"}) {
    const std::string bytes = Encode(ext, src);
    auto info = ProbeImage(bytes);
    ASSERT_TRUE(info.ok()) << ext << ": " << info.status();
    EXPECT_EQ(info->width, 34) << ext;
    EXPECT_EQ(info->height, 21) << ext;
    auto decoded = DecodeImage(bytes, {}, 8, 34 * 21);
    ASSERT_TRUE(decoded.ok()) << ext << ": " << decoded.status();
    EXPECT_EQ(decoded->size(), src.size());
    // One pixel fewer allowed: refused from the header.
    auto refused = DecodeImage(bytes, {}, 8, 34 * 21 - 1);
    ASSERT_FALSE(refused.ok()) << ext;
    EXPECT_EQ(DecodeFailureOf(refused.status()), DecodeFailure::kTooLarge) << ext;
  }
}

// Found by image_decode_fuzz: OpenCV takes the byte after a PNM number as its
// terminator, so "3333#233333" is width 3333, height 233333 (the '#' starts no
// comment). Our header reader took 3333x5, let it past --max-pixels, and
// OpenCV then allocated 2.3 GB.
TEST(ImageDecoderTest, PnmHeaderIsReadAsOpenCvReadsIt) {
  const std::string ppm(
      "P6\n3333#233333\x9b"
      "3]\n5\0",
      20);
  auto info = ProbeImage(ppm);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->width, 3333);
  EXPECT_EQ(info->height, 233333);
  auto refused = DecodeImage(ppm, {}, 8, 4'000'000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(DecodeFailureOf(refused.status()), DecodeFailure::kTooLarge) << refused.status();
  // An ordinary comment line still is one.
  auto commented = ProbeImage(std::string("P6\n# made by hand\n7 5\n255\n") + std::string(7 * 5 * 3, '\x10'));
  ASSERT_TRUE(commented.ok()) << commented.status();
  EXPECT_EQ(commented->width, 7);
  EXPECT_EQ(commented->height, 5);
}

// A BMP whose header claims 60000 x 60000 pixels but holds a few bytes: the
// limit refuses it before OpenCV allocates anything; without a limit it is
// corrupt, not a crash.
TEST(ImageDecoderTest, HugeHeaderIsRefusedBeforeDecoding) {
  std::string bmp = Encode(".bmp", SyntheticImage(4, 4, 1));
  for (int at : {18, 22}) {
    const uint32_t v = 60000;
    for (int k = 0; k < 4; ++k) bmp[at + k] = static_cast<char>((v >> (8 * k)) & 0xff);
  }
  auto info = ProbeImage(bmp);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->width, 60000);
  auto refused = DecodeImage(bmp, {}, 8, 100'000'000);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(DecodeFailureOf(refused.status()), DecodeFailure::kTooLarge);
  // A WebP whose VP8 header says 0 x 0 (found by the image_decode fuzzer).
  std::string webp("RIFF\x0a\x0a\x22\x30WEBPVP8 VP8L~\x01\x02\x03\x04\xff\xd8\x05\x00\x00\x00\x00\x01", 33);
  auto zero = ProbeImage(webp);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(DecodeFailureOf(zero.status()), DecodeFailure::kCorrupt) << zero.status();
  // A PNG header with a width past 2^31 is corrupt, not a negative size.
  std::string png = Encode(".png", SyntheticImage(4, 4, 1));
  png[16] = '\x80';
  auto bad = ProbeImage(png);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(DecodeFailureOf(bad.status()), DecodeFailure::kCorrupt);
}

TEST(ImageDecoderTest, UnknownFormatsAreNotImages) {
  auto status = ProbeImage("GIF89a\x01\x00\x01\x00");
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(DecodeFailureOf(status.status()), DecodeFailure::kNotAnImage);
  EXPECT_NE(status.status().message().find("supported format"), std::string::npos);
}

TEST(ImageDecoderTest, JpegDecodesToRgbCloseToSource) {
  const cv::Mat src = SyntheticImage(60, 80, 1);
  auto rgb = DecodeImage(EncodeJpeg(src, 95));
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  ASSERT_EQ(rgb->type(), CV_8UC3);
  ASSERT_EQ(rgb->size(), src.size());
  EXPECT_LT(MeanAbsDiff(*rgb, src), 12.0);  // grain is lossy
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

TEST(ImageDecoderTest, RegionDecodeEqualsCroppedFullDecode) {
  const std::string jpeg = EncodeJpeg(SyntheticImage(203, 301, 7), 90);
  auto full = DecodeImage(jpeg);
  ASSERT_TRUE(full.ok());
  for (const CropBox box : {CropBox{0, 0, 50, 60}, CropBox{37, 101, 120, 77}, CropBox{150, 250, 53, 51}}) {
    auto region = DecodeImage(jpeg, box);
    ASSERT_TRUE(region.ok()) << region.status();
    ASSERT_EQ(region->size(), cv::Size(box.width, box.height));
    const cv::Mat expected = (*full)(cv::Rect(box.left, box.top, box.width, box.height));
    EXPECT_EQ(cv::norm(*region, expected, cv::NORM_INF), 0) << box.top << "," << box.left;
  }
}

TEST(ImageDecoderTest, DctScalingShrinksLikeAnAreaFilter) {
  const cv::Mat src = SyntheticImage(256, 320, 8);
  const std::string jpeg = EncodeJpeg(src, 95);
  for (int d : {2, 4, 8}) {
    auto scaled = DecodeImage(jpeg, CropBox{}, 8 / d);
    ASSERT_TRUE(scaled.ok()) << scaled.status();
    ASSERT_EQ(scaled->size(), cv::Size(320 / d, 256 / d));
    cv::Mat area;
    cv::resize(src, area, scaled->size(), 0, 0, cv::INTER_AREA);
    EXPECT_LT(MeanAbsDiff(*scaled, area), 6.0) << "1/" << d;
  }
  // A region and a scale together: the region's size divided by the scale.
  auto both = DecodeImage(jpeg, CropBox{16, 32, 128, 160}, 2);
  ASSERT_TRUE(both.ok());
  EXPECT_EQ(both->size(), cv::Size(40, 32));
}

TEST(ImageDecoderTest, ProgressiveGrayscaleAndCmykJpegsComeOutAsRgb) {
  const cv::Mat src(48, 64, CV_8UC3, cv::Scalar(30, 140, 220));
  auto progressive = DecodeImage(EncodeJpeg(src, 95, /*progressive=*/true), CropBox{8, 8, 16, 16});
  ASSERT_TRUE(progressive.ok()) << progressive.status();
  EXPECT_LT(MeanAbsDiff(*progressive, src(cv::Rect(8, 8, 16, 16))), 3.0);

  cv::Mat gray(16, 16, CV_8UC1, cv::Scalar(90));
  std::vector<uint8_t> buf;
  cv::imencode(".jpg", gray, buf);
  auto rgb = DecodeImage(std::string(buf.begin(), buf.end()));
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(rgb->channels(), 3);
  EXPECT_NEAR(rgb->at<cv::Vec3b>(8, 8)[0], 90, 2);

  // Adobe CMYK stores 255 - ink; with K at 255 (no black) the RGB is C, M, Y.
  const cv::Mat cmyk(16, 16, CV_8UC4, cv::Scalar(200, 60, 10, 255));
  auto from_cmyk = DecodeImage(testing::EncodeCmykJpeg(cmyk, 95));
  ASSERT_TRUE(from_cmyk.ok()) << from_cmyk.status();
  const cv::Vec3b px = from_cmyk->at<cv::Vec3b>(8, 8);
  EXPECT_NEAR(px[0], 200, 4);
  EXPECT_NEAR(px[1], 60, 4);
  EXPECT_NEAR(px[2], 10, 4);
}

TEST(ImageDecoderTest, PngVariantsAndWebpBecome8BitRgb) {
  const cv::Mat src = SyntheticImage(20, 30, 2);
  auto png = DecodeImage(testing::EncodeWithOpenCv(src, ".png"));
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(cv::norm(*png, src, cv::NORM_INF), 0);

  cv::Mat deep;
  src.convertTo(deep, CV_16UC3, 257);  // 16-bit: v * 257 maps back to v
  auto png16 = DecodeImage(testing::EncodeWithOpenCv(deep, ".png"));
  ASSERT_TRUE(png16.ok()) << png16.status();
  EXPECT_EQ(png16->type(), CV_8UC3);
  EXPECT_LE(cv::norm(*png16, src, cv::NORM_INF), 1);

  cv::Mat rgba;
  cv::cvtColor(src, rgba, cv::COLOR_RGB2RGBA);
  auto alpha = DecodeImage(testing::EncodeWithOpenCv(rgba, ".png"));
  ASSERT_TRUE(alpha.ok()) << alpha.status();
  EXPECT_EQ(alpha->channels(), 3);
  EXPECT_EQ(cv::norm(*alpha, src, cv::NORM_INF), 0);

  cv::Mat indices(4, 5, CV_8UC1, cv::Scalar(1));
  indices.at<uint8_t>(0, 0) = 0;
  auto palette = DecodeImage(testing::EncodePalettePng(indices, {{255, 0, 0}, {0, 0, 255}}));
  ASSERT_TRUE(palette.ok()) << palette.status();
  EXPECT_EQ(palette->at<cv::Vec3b>(0, 0), cv::Vec3b(255, 0, 0));
  EXPECT_EQ(palette->at<cv::Vec3b>(2, 3), cv::Vec3b(0, 0, 255));

  const std::string webp = testing::EncodeWithOpenCv(src, ".webp");
  auto info = ProbeImage(webp);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->format, ImageFormat::kWebp);
  EXPECT_EQ(info->width, 30);
  EXPECT_EQ(info->height, 20);
  auto decoded = DecodeImage(webp);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->size(), src.size());
}

TEST(ImageDecoderTest, FormatComesFromTheBytesNotTheName) {
  const cv::Mat src = SyntheticImage(10, 12, 3);
  auto png = ProbeImage(testing::EncodeWithOpenCv(src, ".png"));  // as if named .JPEG
  ASSERT_TRUE(png.ok());
  EXPECT_EQ(png->format, ImageFormat::kPng);
  EXPECT_EQ(png->width, 12);
  auto jpeg = ProbeImage(EncodeJpeg(src, 90));
  ASSERT_TRUE(jpeg.ok());
  EXPECT_EQ(jpeg->format, ImageFormat::kJpeg);
  EXPECT_EQ(jpeg->height, 10);
}

// Found by the image_decode fuzzer: a region wholly outside a non-JPEG image
// gave an empty one-channel result (OpenCV's cvtColor used to refuse it).
TEST(ImageDecoderTest, ARegionOutsideTheImageIsCorrupt) {
  const cv::Mat src = SyntheticImage(3, 4, 3);
  for (const char* ext : {".png", ".ppm", ".bmp"}) {
    auto decoded = DecodeImage(Encode(ext, src), CropBox{3, 3, 1, 4}, 8, 0);
    ASSERT_FALSE(decoded.ok()) << ext;
    EXPECT_EQ(DecodeFailureOf(decoded.status()), DecodeFailure::kCorrupt) << decoded.status();
    EXPECT_NE(decoded.status().message().find("outside the 4x3 image"), std::string::npos) << decoded.status();
  }
}

TEST(ImageDecoderTest, BadBytesFailWithTheirKind) {
  const std::string jpeg = EncodeJpeg(SyntheticImage(64, 64, 4), 90);
  const std::string png = testing::EncodeWithOpenCv(SyntheticImage(64, 64, 4), ".png");
  // A header libjpeg refuses: sample precision 99 in the frame header.
  std::string bad_precision = jpeg;
  const size_t sof = bad_precision.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  bad_precision[sof + 4] = 99;
  const std::pair<std::string, DecodeFailure> cases[] = {
      {"", DecodeFailure::kEmpty},
      {"hello, not an image", DecodeFailure::kNotAnImage},
      {bad_precision, DecodeFailure::kCorrupt},
      {std::string("\xFF\xD8\xFF\x00garbage", 11), DecodeFailure::kTruncated},
      {jpeg.substr(0, jpeg.size() / 2), DecodeFailure::kTruncated},
      {png.substr(0, png.size() / 2), DecodeFailure::kCorrupt},
  };
  for (const auto& [bytes, kind] : cases) {
    auto rgb = DecodeImage(bytes);
    ASSERT_FALSE(rgb.ok()) << "size " << bytes.size();
    EXPECT_EQ(DecodeFailureOf(rgb.status()), kind) << rgb.status();
    EXPECT_NE(rgb.status().message().find(DecodeFailureName(kind)), std::string::npos) << rgb.status();
  }
}

TEST(ImageDecoderTest, PixelLimitIsCheckedFromTheHeader) {
  const cv::Mat src = SyntheticImage(100, 120, 5);
  for (const std::string& bytes : {EncodeJpeg(src, 90), testing::EncodeWithOpenCv(src, ".png")}) {
    auto too_big = DecodeImage(bytes, CropBox{}, 8, /*max_pixels=*/100 * 119);
    ASSERT_FALSE(too_big.ok());
    EXPECT_EQ(DecodeFailureOf(too_big.status()), DecodeFailure::kTooLarge) << too_big.status();
    EXPECT_TRUE(DecodeImage(bytes, CropBox{}, 8, 100 * 120).ok());
  }
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

// Found by the fuzzer: bytes our PNM probe took for a header ("P3" with no
// whitespace after it) but OpenCV did not, so OpenCV chose its DICOM reader
// ("DICM" at offset 128), which aborted the process.
TEST(ImageDecoderTest, NearPnmBytesWithADicomMarkerAreRefusedNotDecoded) {
  std::string bytes = "P3022#33\n";
  bytes += std::string(8, '\xff');
  bytes += std::string(128 - bytes.size(), '\0');
  bytes += "DICM33=";
  EXPECT_FALSE(ProbeImage(bytes).ok()) << "P3 must be followed by whitespace";
  EXPECT_FALSE(DecodeImage(bytes, CropBox{}, 8, 1'000'000).ok());
  // A well-formed PNM header with a DICOM marker is a PGM: no decoder of
  // ours looks for DICOM (OpenCV's imdecode, no longer used, did).
  std::string pnm = "P5 4 4 255\n";
  pnm += std::string(128 - pnm.size(), '\x10');
  pnm += "DICM";
  pnm += std::string(16, '\x10');
  auto decoded = DecodeImage(pnm, CropBox{}, 8, 1'000'000);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->size(), cv::Size(4, 4));
}

}  // namespace
}  // namespace stoker
