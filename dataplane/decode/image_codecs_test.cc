#include "dataplane/decode/image_codecs.h"

#include <opencv2/imgcodecs.hpp>  // the reference these codecs replace
#include <opencv2/imgproc.hpp>

#include "gtest/gtest.h"
#include "tests/testdata/image_set.h"

namespace stoker {
namespace {

using ::stoker::testing::SyntheticImage;

// `bgr` (OpenCV's channel order, any depth and channel count) encoded by
// OpenCV under `ext` with `params`.
std::string Reference(const char* ext, const cv::Mat& bgr, const std::vector<int>& params = {}) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(cv::imencode(ext, bgr, out, params)) << ext;
  return std::string(out.begin(), out.end());
}

// What the decoder replaced: imdecode's 8-bit BGR turned to RGB.
cv::Mat OpenCvRgb(const std::string& bytes) {
  const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
  cv::Mat bgr = cv::imdecode(buf, cv::IMREAD_COLOR | cv::IMREAD_IGNORE_ORIENTATION), rgb;
  EXPECT_FALSE(bgr.empty());
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

void ExpectSamePixels(const std::string& bytes, const std::string& what) {
  absl::StatusOr<cv::Mat> ours = DecodeOtherImage(bytes);
  ASSERT_TRUE(ours.ok()) << what << ": " << ours.status();
  const cv::Mat ref = OpenCvRgb(bytes);
  ASSERT_EQ(ours->size(), ref.size()) << what;
  ASSERT_EQ(ours->type(), CV_8UC3) << what;
  EXPECT_EQ(cv::norm(*ours, ref, cv::NORM_INF), 0) << what;
}

// A literal's bytes, NULs included.
template <size_t N>
std::string Bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

// The variants each format comes in: colour, grey, alpha, 16-bit.
struct Variants {
  cv::Mat bgr, gray, bgra, bgr16, gray16;
};

Variants MakeVariants(int rows, int cols) {
  Variants v;
  cv::cvtColor(SyntheticImage(rows, cols, 7), v.bgr, cv::COLOR_RGB2BGR);
  cv::cvtColor(v.bgr, v.gray, cv::COLOR_BGR2GRAY);
  cv::cvtColor(v.bgr, v.bgra, cv::COLOR_BGR2BGRA);
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) v.bgra.at<cv::Vec4b>(y, x)[3] = static_cast<uint8_t>((x * 7 + y * 3) & 0xff);
  }
  v.bgr.convertTo(v.bgr16, CV_16U, 257.0, 3.0);  // low bytes that must be cut, not rounded
  v.gray.convertTo(v.gray16, CV_16U, 257.0, 100.0);
  return v;
}

TEST(ImageCodecsTest, PngDecodesAsOpenCvDid) {
  const Variants v = MakeVariants(37, 53);
  ExpectSamePixels(Reference(".png", v.bgr), "PNG RGB");
  ExpectSamePixels(Reference(".png", v.gray), "PNG grey");
  ExpectSamePixels(Reference(".png", v.bgra), "PNG RGBA (alpha dropped, not blended)");
  ExpectSamePixels(Reference(".png", v.bgr16), "PNG 16-bit RGB");
  ExpectSamePixels(Reference(".png", v.gray16), "PNG 16-bit grey");
  ExpectSamePixels(Reference(".png", v.gray, {cv::IMWRITE_PNG_BILEVEL, 1}), "PNG 1-bit grey");
}

TEST(ImageCodecsTest, PalettePngExpandsAsOpenCvDid) {
  // A palette PNG written with libpng (OpenCV writes none): our PNG encoder's
  // output re-read, then a hand-made 4-colour palette image.
  const cv::Mat rgb = SyntheticImage(16, 16, 3);
  absl::StatusOr<std::string> png = EncodePng(rgb);
  ASSERT_TRUE(png.ok()) << png.status();
  ExpectSamePixels(*png, "our PNG");
  // Palette: the masks' writer in the COCO tests makes such files; the
  // segmentation tests compare them. Here: the decoder's view of one.
  cv::Mat indexed(8, 8, CV_8UC1);
  for (int i = 0; i < 64; ++i) indexed.data[i] = static_cast<uint8_t>(i % 4);
  std::vector<uint8_t> out;
  ASSERT_TRUE(cv::imencode(".png", indexed, out));
  ExpectSamePixels(std::string(out.begin(), out.end()), "PNG grey of indices");
}

TEST(ImageCodecsTest, WebpDecodesAsOpenCvDid) {
  const Variants v = MakeVariants(40, 61);
  ExpectSamePixels(Reference(".webp", v.bgr, {cv::IMWRITE_WEBP_QUALITY, 80}), "WebP lossy");
  ExpectSamePixels(Reference(".webp", v.bgr, {cv::IMWRITE_WEBP_QUALITY, 101}), "WebP lossless");
  ExpectSamePixels(Reference(".webp", v.bgra, {cv::IMWRITE_WEBP_QUALITY, 101}), "WebP lossless with alpha");
  ExpectSamePixels(Reference(".webp", v.bgra, {cv::IMWRITE_WEBP_QUALITY, 70}), "WebP lossy with alpha");
}

TEST(ImageCodecsTest, TiffDecodesAsOpenCvDid) {
  const Variants v = MakeVariants(29, 45);
  ExpectSamePixels(Reference(".tiff", v.bgr), "TIFF RGB");
  ExpectSamePixels(Reference(".tiff", v.gray), "TIFF grey");
  ExpectSamePixels(Reference(".tiff", v.bgr, {cv::IMWRITE_TIFF_COMPRESSION, 1}), "TIFF RGB uncompressed");
  ExpectSamePixels(Reference(".tiff", v.bgra), "TIFF RGBA");
  ExpectSamePixels(Reference(".tiff", v.bgr16), "TIFF 16-bit RGB");
  ExpectSamePixels(Reference(".tiff", v.gray16), "TIFF 16-bit grey");
}

TEST(ImageCodecsTest, BmpAndPnmDecodeAsOpenCvDid) {
  const Variants v = MakeVariants(23, 31);
  ExpectSamePixels(Reference(".bmp", v.bgr), "BMP 24-bit");
  ExpectSamePixels(Reference(".bmp", v.gray), "BMP 8-bit palette");
  ExpectSamePixels(Reference(".bmp", v.bgra), "BMP 32-bit");
  ExpectSamePixels(Reference(".ppm", v.bgr), "PPM (P6)");
  ExpectSamePixels(Reference(".pgm", v.gray), "PGM (P5)");
  ExpectSamePixels(Reference(".pbm", v.gray), "PBM (P4)");
}

TEST(ImageCodecsTest, AsciiPnmDecodesAsOpenCvDid) {
  const Variants v = MakeVariants(9, 13);
  ExpectSamePixels(Reference(".ppm", v.bgr, {cv::IMWRITE_PXM_BINARY, 0}), "PPM (P3)");
  ExpectSamePixels(Reference(".pgm", v.gray, {cv::IMWRITE_PXM_BINARY, 0}), "PGM (P2)");
  ExpectSamePixels(Reference(".pbm", v.gray, {cv::IMWRITE_PXM_BINARY, 0}), "PBM (P1)");
  // Hand-made: a maxval under 255 scaled by integer division, one over it
  // cut to the high byte, values over the maxval saturated, touching P1
  // digits, comments between samples.
  ExpectSamePixels("P2\n3 1\n7\n3 5 6\n", "PGM maxval 7");
  ExpectSamePixels("P3\n1 1\n300\n299 256 1\n", "PPM maxval 300");
  ExpectSamePixels("P2\n2 1\n255\n300 7\n", "PGM value over maxval");
  ExpectSamePixels("P1\n3 2\n010\n# a comment\n1 1 0\n", "PBM touching digits");
}

TEST(ImageCodecsTest, PamIsReadInItsOwnChannelOrder) {
  // RGB tuples come out as RGB (OpenCV's reader swapped R and B); alpha and
  // the grey depths as for PNG; two-byte samples keep the high byte.
  absl::StatusOr<cv::Mat> rgb = DecodeOtherImage(Bytes(
      "P7\nWIDTH 2\nHEIGHT 1\nDEPTH 4\nMAXVAL 255\nTUPLTYPE RGB_ALPHA\nENDHDR\n\x01\x02\x03\xff\x04\x05\x06\x00"));
  ASSERT_TRUE(rgb.ok()) << rgb.status();
  EXPECT_EQ(rgb->at<cv::Vec3b>(0, 0), cv::Vec3b(1, 2, 3));
  EXPECT_EQ(rgb->at<cv::Vec3b>(0, 1), cv::Vec3b(4, 5, 6));
  absl::StatusOr<cv::Mat> grey = DecodeOtherImage(
      Bytes("P7\nWIDTH 1\nHEIGHT 2\nDEPTH 1\nMAXVAL 65535\nTUPLTYPE GRAYSCALE\nENDHDR\n\xab\xcd\x12\x34"));
  ASSERT_TRUE(grey.ok()) << grey.status();
  EXPECT_EQ(grey->at<cv::Vec3b>(0, 0), cv::Vec3b(0xab, 0xab, 0xab));
  EXPECT_EQ(grey->at<cv::Vec3b>(1, 0), cv::Vec3b(0x12, 0x12, 0x12));
}

TEST(ImageCodecsTest, SixteenBitPnmKeepsTheHighByte) {
  // Found by fuzzing: stb_image's 16-bit PNM reader overflowed its buffer on
  // this header (maxval 256, then a second image); PNM is read here now.
  const std::string crafted = std::string("P5\n7 6\n256 2\n57P4\n7 6\n") + std::string(200, '\x9f');
  absl::StatusOr<cv::Mat> decoded = DecodeOtherImage(crafted);
  ASSERT_TRUE(decoded.ok()) << decoded.status();  // 7x6 two-byte samples: 84 bytes are there
  EXPECT_EQ(decoded->size(), cv::Size(7, 6));
  std::string pgm16 = "P5\n2 1\n65535\n";
  pgm16 += std::string("\x12\x34\xab\xcd", 4);
  decoded = DecodeOtherImage(pgm16);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->at<cv::Vec3b>(0, 0), cv::Vec3b(0x12, 0x12, 0x12));
  EXPECT_EQ(decoded->at<cv::Vec3b>(0, 1), cv::Vec3b(0xab, 0xab, 0xab));
  EXPECT_FALSE(DecodeOtherImage("P5\n2 1\n65535\n\x12\x34\xab").ok()) << "one byte short";
  EXPECT_FALSE(DecodeOtherImage("P6\n2 1\n0\n123456").ok()) << "maxval 0";
}

TEST(ImageCodecsTest, MaxPixelsIsCheckedFromEachHeaderBeforeDecoding) {
  const Variants v = MakeVariants(40, 50);
  for (const char* ext : {".png", ".webp", ".tiff", ".bmp", ".ppm", ".pbm"}) {
    const std::string bytes = Reference(ext, std::string(ext) == ".pbm" ? v.gray : v.bgr);
    EXPECT_TRUE(DecodeOtherImage(bytes, 2000).ok()) << ext;
    absl::StatusOr<cv::Mat> refused = DecodeOtherImage(bytes, 1999);
    ASSERT_FALSE(refused.ok()) << ext;
    EXPECT_NE(refused.status().message().find("50x40 pixels exceed the limit of 1999"), std::string::npos)
        << refused.status();
  }
}

TEST(ImageCodecsTest, EncodersWriteOpenCvsBytes) {
  for (const auto& [rows, cols] : {std::pair{48, 64}, std::pair{17, 33}, std::pair{224, 200}}) {
    const cv::Mat rgb = SyntheticImage(rows, cols, 11);
    cv::Mat bgr;
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
    for (int quality : {90, 75, 100}) {
      absl::StatusOr<std::string> jpeg = EncodeJpeg(rgb, quality);
      ASSERT_TRUE(jpeg.ok()) << jpeg.status();
      EXPECT_EQ(*jpeg, Reference(".jpg", bgr, {cv::IMWRITE_JPEG_QUALITY, quality}))
          << rows << "x" << cols << " q" << quality;
    }
    absl::StatusOr<std::string> png = EncodePng(rgb);
    ASSERT_TRUE(png.ok()) << png.status();
    EXPECT_EQ(*png, Reference(".png", bgr)) << rows << "x" << cols;
    // A view with a row stride (not contiguous) encodes the same pixels.
    const cv::Mat view = rgb(cv::Rect(1, 1, cols - 2, rows - 2));
    absl::StatusOr<std::string> png_view = EncodePng(view);
    ASSERT_TRUE(png_view.ok());
    EXPECT_EQ(cv::norm(OpenCvRgb(*png_view), view, cv::NORM_INF), 0);
  }
  EXPECT_FALSE(EncodeJpeg(cv::Mat(4, 4, CV_8UC1), 90).ok());
  EXPECT_FALSE(EncodeJpeg(SyntheticImage(4, 4, 1), 0).ok());
  EXPECT_FALSE(EncodePng(cv::Mat()).ok());
}

TEST(ImageCodecsTest, BadBytesAreErrorsThatNameTheFormat) {
  const Variants v = MakeVariants(32, 32);
  struct Case {
    std::string bytes, format;
  };
  std::vector<Case> cases;
  for (const auto& [ext, format] : {std::pair{".png", "PNG"}, std::pair{".webp", "WebP"}, std::pair{".tiff", "TIFF"},
                                    std::pair{".bmp", "BMP"}, std::pair{".ppm", "PNM"}, std::pair{".pbm", "PBM"}}) {
    const std::string whole = Reference(ext, std::string(ext) == ".pbm" ? v.gray : v.bgr);
    cases.push_back({whole.substr(0, whole.size() / 2), format});  // truncated
    std::string flipped = whole;
    for (size_t i = whole.size() / 3; i < whole.size(); i += 7) flipped[i] = static_cast<char>(~flipped[i]);
    cases.push_back({flipped, ""});  // corrupt: an error or some pixels, never a crash
  }
  cases.push_back({"P3\n2 2\n255\n0 0 0 0 0 0 0 0 0 0 0\n", "PNM"});  // one sample short
  cases.push_back({"P2\n1 1\n255\nx\n", "PNM"});
  cases.push_back({"P7\nWIDTH 2\nHEIGHT 2\nDEPTH 3\nMAXVAL 255\nENDHDR\n12345", "PAM"});
  cases.push_back({"P7\nWIDTH 2\nHEIGHT 2\nDEPTH 5\nMAXVAL 255\nENDHDR\n", "PAM"});
  cases.push_back({"not an image at all", "not a PNG"});
  for (const Case& c : cases) {
    absl::StatusOr<cv::Mat> decoded = DecodeOtherImage(c.bytes);
    if (c.format.empty()) continue;
    ASSERT_FALSE(decoded.ok()) << c.format << " (" << c.bytes.size() << " bytes)";
    EXPECT_NE(decoded.status().message().find(c.format), std::string::npos) << decoded.status();
  }
}

}  // namespace
}  // namespace stoker
