#include "dataplane/sample/stored_sample.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/sources/manifest.h"
#include "gtest/gtest.h"
#include "tests/testdata/image_set.h"

namespace stoker {
namespace {

using testing::SyntheticImage;

TEST(StoredSampleTest, FormatsParseAndNameTheirField) {
  struct Case {
    std::string encoding, compression, field, name;
  };
  for (const Case& c : std::vector<Case>{{"raw", "none", "npy", "raw"},
                                         {"raw", "zstd", "npy.zst", "raw+zstd"},
                                         {"raw", "lz4", "npy.lz4", "raw+lz4"},
                                         {"jpeg:75", "none", "jpg", "jpeg:75"},
                                         {"jpeg", "zstd:19", "jpg.zst", "jpeg:90+zstd:19"},
                                         {"png", "none", "png", "png"}}) {
    absl::StatusOr<StoredFormat> f = ParseStoredFormat(c.encoding, c.compression);
    ASSERT_TRUE(f.ok()) << c.encoding << " " << f.status();
    EXPECT_EQ(f->Field(), c.field);
    EXPECT_EQ(f->Name(), c.name);
    // The text forms parse back to the same format (the manifest relies on it).
    absl::StatusOr<StoredFormat> again = ParseStoredFormat(f->EncodingText(), f->CompressionText());
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->Name(), c.name);
  }
  struct Bad {
    std::string encoding, compression, fragment;
  };
  for (const Bad& b : std::vector<Bad>{{"bmp", "none", "format 'bmp' is not one of"},
                                       {"jpeg:0", "none", "JPEG quality '0'"},
                                       {"jpeg:101", "none", "1..100"},
                                       {"raw:3", "none", "format 'raw:3'"},
                                       {"raw", "gzip", "compression 'gzip' is not one of"},
                                       {"raw", "zstd:99", "zstd level '99'"}}) {
    absl::StatusOr<StoredFormat> f = ParseStoredFormat(b.encoding, b.compression);
    ASSERT_FALSE(f.ok()) << b.encoding << " " << b.compression;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find(b.fragment), std::string::npos) << f.status();
  }
}

TEST(StoredSampleTest, NpyHeaderIsAlignedAndDescribesTheArray) {
  for (auto [h, w] : std::vector<std::pair<int, int>>{{1, 1}, {256, 341}, {4000, 6000}}) {
    const std::string header = NpyHeader(h, w);
    EXPECT_EQ(header.size() % 64, 0u) << h << "x" << w;
    EXPECT_EQ(header.substr(0, 6), "\x93NUMPY");
    EXPECT_EQ(header.back(), '\n');
    EXPECT_NE(header.find("'shape': (" + std::to_string(h) + ", " + std::to_string(w) + ", 3)"), std::string::npos);
  }
}

TEST(StoredSampleTest, RawAndPngRoundTripExactlyUnderEveryCompression) {
  const cv::Mat rgb = SyntheticImage(37, 53, 7);
  for (const char* encoding : {"raw", "png"}) {
    for (const char* compression : {"none", "zstd", "lz4"}) {
      const StoredFormat f = *ParseStoredFormat(encoding, compression);
      absl::StatusOr<std::string> stored = EncodeStoredSample(rgb, f);
      ASSERT_TRUE(stored.ok()) << f.Name() << ": " << stored.status();
      absl::StatusOr<std::string> plain = Decompress(*stored, f.compression, 1 << 20);
      ASSERT_TRUE(plain.ok()) << f.Name() << ": " << plain.status();
      cv::Mat back;
      if (f.encoding == StoredEncoding::kRaw) {
        absl::StatusOr<cv::Mat> parsed = ParseNpyImage(*plain, 0);
        ASSERT_TRUE(parsed.ok()) << parsed.status();
        back = parsed->clone();
      } else {
        absl::StatusOr<cv::Mat> decoded = DecodeImage(*plain);
        ASSERT_TRUE(decoded.ok()) << decoded.status();
        back = *decoded;
      }
      ASSERT_EQ(back.size(), rgb.size()) << f.Name();
      EXPECT_EQ(cv::norm(back, rgb, cv::NORM_INF), 0) << f.Name() << ": not exact (or channels swapped)";
    }
  }
}

TEST(StoredSampleTest, FloatPixelsRoundTripRawOnly) {
  cv::Mat rgb;
  SyntheticImage(19, 23, 3).convertTo(rgb, CV_32FC3, 1.0 / 255, -0.5);
  for (const char* compression : {"none", "zstd"}) {
    const StoredFormat f = *ParseStoredFormat("raw", compression);
    absl::StatusOr<std::string> stored = EncodeStoredSample(rgb, f);
    ASSERT_TRUE(stored.ok()) << stored.status();
    absl::StatusOr<std::string> plain = Decompress(*stored, f.compression, 1 << 20);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_NE(plain->find("'descr': '<f4'"), std::string::npos);
    EXPECT_EQ(plain->size(), 128u + 19 * 23 * 3 * 4);
    absl::StatusOr<cv::Mat> back = ParseNpyImage(*plain, 0);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(back->type(), CV_32FC3);
    EXPECT_EQ(cv::norm(*back, rgb, cv::NORM_INF), 0) << compression;
  }
  absl::StatusOr<std::string> jpeg = EncodeStoredSample(rgb, *ParseStoredFormat("jpeg:90", "none"));
  EXPECT_TRUE(absl::IsInvalidArgument(jpeg.status())) << jpeg.status();
  EXPECT_NE(jpeg.status().message().find("stored raw only"), std::string::npos) << jpeg.status();
}

TEST(StoredSampleTest, JpegIsCloseAndKeepsChannelOrder) {
  cv::Mat rgb(64, 64, CV_8UC3, cv::Scalar(200, 40, 10));  // strongly red in RGB
  const StoredFormat f = *ParseStoredFormat("jpeg:95", "none");
  absl::StatusOr<std::string> stored = EncodeStoredSample(rgb, f);
  ASSERT_TRUE(stored.ok());
  absl::StatusOr<cv::Mat> back = DecodeImage(*stored);
  ASSERT_TRUE(back.ok());
  EXPECT_LE(cv::norm(*back, rgb, cv::NORM_INF), 8);
}

TEST(StoredSampleTest, DamagedFramesAndArraysAreDataLossNamingTheProblem) {
  const cv::Mat rgb = SyntheticImage(20, 30, 3);
  const std::string zst = *EncodeStoredSample(rgb, *ParseStoredFormat("raw", "zstd"));
  const std::string lz4 = *EncodeStoredSample(rgb, *ParseStoredFormat("raw", "lz4"));
  const std::string npy = *EncodeStoredSample(rgb, *ParseStoredFormat("raw", "none"));
  struct Case {
    std::string name, bytes;
    StoredCompression compression;
    int64_t max_bytes;
    std::string fragment;
  };
  std::string flipped = zst;
  flipped[flipped.size() / 2] ^= 0x55;
  std::vector<Case> cases = {
      {"zstd truncated", zst.substr(0, zst.size() / 2), StoredCompression::kZstd, 1 << 20, "zstd frame"},
      {"zstd garbage", "not a frame at all", StoredCompression::kZstd, 1 << 20, "zstd frame"},
      {"zstd too big", zst, StoredCompression::kZstd, 100, "expected 1..100"},
      {"lz4 truncated", lz4.substr(0, lz4.size() / 2), StoredCompression::kLz4, 1 << 20, "lz4 frame"},
      {"lz4 garbage", "garbage garbage!", StoredCompression::kLz4, 1 << 20, "lz4 frame"},
      {"lz4 too big", lz4, StoredCompression::kLz4, 100, "expected 1..100"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> plain = Decompress(c.bytes, c.compression, c.max_bytes);
    ASSERT_FALSE(plain.ok()) << c.name;
    EXPECT_EQ(plain.status().code(), absl::StatusCode::kDataLoss) << c.name;
    EXPECT_NE(plain.status().message().find(c.fragment), std::string::npos) << c.name << ": " << plain.status();
  }
  // A flipped byte inside a frame: an error or different bytes, never a crash.
  absl::StatusOr<std::string> maybe = Decompress(flipped, StoredCompression::kZstd, 1 << 20);
  if (maybe.ok()) {
    EXPECT_NE(*maybe, npy);
  }

  struct NpyCase {
    std::string name, bytes;
    int64_t max_pixels;
    std::string fragment;
  };
  std::string float_npy = npy;  // float32 needs four times the data
  float_npy.replace(float_npy.find("|u1"), 3, "<f4");
  std::string big_endian = npy;
  big_endian.replace(big_endian.find("|u1"), 3, ">f4");
  std::string two_d = npy;
  two_d.replace(two_d.find("(20, 30, 3)"), 11, "(20, 90)   ");
  // Headers numpy would not write, each read one way by a lenient parser:
  // a second descr (the fuzzer's find), no comma, another key, bytes after
  // the dict, an unquoted key.
  const auto with_dict = [&](std::string dict) {
    std::string bytes = npy;
    const size_t at = bytes.find('{'), end = bytes.find('\n');
    dict.resize(end - at, ' ');
    return bytes.replace(at, end - at, dict);
  };
  const std::string twice =
      with_dict("{'descr': '|u2', 'fortran_order': False, 'descr': '|u1', 'shape': (20, 30, 3), }");
  const std::string no_comma = with_dict("{'descr': '|u1' 'fortran_order': False, 'shape': (20, 30, 3), }");
  const std::string other_key = with_dict("{'descr': '|u1', 'fortran_order': False, 'shape': (20, 30, 3), 'x': 1}");
  const std::string after = with_dict("{'descr': '|u1', 'fortran_order': False, 'shape': (20, 30, 3), } x");
  const std::string unquoted = with_dict("{descr: '|u1', 'fortran_order': False, 'shape': (20, 30, 3), }");
  const std::string no_sep = with_dict("{'descr': '|u1', 'fortran_order': False, 'shape': (20 30, 3), }");
  ASSERT_TRUE(ParseNpyImage(with_dict("{'descr': '|u1', 'fortran_order': False, 'shape': (20, 30, 3), }"), 0).ok())
      << "the same header, rewritten by the test's helper, parses";
  for (const NpyCase& c :
       std::vector<NpyCase>{{"no magic", "P6 20 30 255", 0, "NumPy magic"},
                            {"short data", npy.substr(0, npy.size() - 1), 0, "needs 1800 bytes"},
                            {"float", float_npy, 0, "needs 7200 bytes"},
                            {"big-endian float", big_endian, 0, "neither uint8 nor little-endian float32"},
                            {"2-D", two_d, 0, "not (height, width, 3)"},
                            {"descr twice", twice, 0, "'descr' twice"},
                            {"no comma", no_comma, 0, "no ',' after 'descr'"},
                            {"another key", other_key, 0, "a key other than"},
                            {"bytes after the dict", after, 0, "bytes after its closing"},
                            {"unquoted key", unquoted, 0, "not a quoted string"},
                            {"shape without commas", no_sep, 0, "not separated by ','"},
                            {"over the pixel limit", npy, 500, "--max-pixels"}}) {
    absl::StatusOr<cv::Mat> parsed = ParseNpyImage(c.bytes, c.max_pixels);
    ASSERT_FALSE(parsed.ok()) << c.name;
    EXPECT_EQ(parsed.status().code(),
              c.max_pixels > 0 ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kDataLoss)
        << c.name;
    EXPECT_NE(parsed.status().message().find(c.fragment), std::string::npos) << c.name << ": " << parsed.status();
  }
}

TEST(StoredSampleTest, ARecordWithFieldsRoundTripsAndDamageIsDataLossNamingIt) {
  const std::vector<StoredField> fields = {{"txt", "a caption"}, {"json", "{\"a\": 1}"}, {"empty", ""}};
  const std::string packed = PackStoredRecord(std::string("\0pixels\0", 8), fields);
  std::string image;
  std::vector<StoredField> got;
  ASSERT_TRUE(UnpackStoredRecord(packed, 8, &image, &got).ok());
  EXPECT_EQ(image, std::string("\0pixels\0", 8));
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].extension, fields[i].extension);
    EXPECT_EQ(got[i].bytes, fields[i].bytes);
  }
  // Every cut short is refused, never read past its end.
  for (size_t n = 0; n < packed.size(); ++n) {
    const absl::Status s = UnpackStoredRecord(packed.substr(0, n), 8, &image, &got);
    if (n == 26 || n == 50 || n == 74) continue;  // whole parts (magic 6, then 12 + name + bytes each): valid
    EXPECT_TRUE(absl::IsDataLoss(s)) << n << ": " << s;
  }
  const absl::Status bare = UnpackStoredRecord("\x93NUMPY", 8, &image, &got);
  EXPECT_NE(bare.message().find("without its header"), std::string::npos) << bare;
  const absl::Status many = UnpackStoredRecord(packed, 2, &image, &got);
  EXPECT_NE(many.message().find("more than 2 parts"), std::string::npos) << many;
  const absl::Status no_image =
      UnpackStoredRecord(PackStoredRecord("", {}).substr(0, 6) + packed.substr(26), 8, &image, &got);
  EXPECT_NE(no_image.message().find("does not begin with its image"), std::string::npos) << no_image;
  // A record without fields is the image alone.
  ASSERT_TRUE(UnpackStoredRecord(PackStoredRecord("px", {}), 8, &image, &got).ok());
  EXPECT_EQ(image, "px");
  EXPECT_TRUE(got.empty());
}

TEST(StoredSampleTest, OnlyTheDatasetsOwnMemberNamesAreReserved) {
  const StoredFormat format = *ParseStoredFormat("raw", "zstd");
  for (const char* ext : {"txt", "json", "jpg", "npy", "seg.png"}) EXPECT_TRUE(IsStorableField(ext, format)) << ext;
  for (const char* ext : {"npy.zst", "cls", "xxh3", "fields.xxh3", "txt.xxh3", ""}) {
    EXPECT_FALSE(IsStorableField(ext, format)) << ext;
  }
  EXPECT_EQ(StoredFieldsChecksums({{"txt", "abc"}, {"json", ""}}),
            absl::StrCat("txt ", StoredChecksum("abc"), "\njson ", StoredChecksum(""), "\n"));
}

TEST(ManifestTest, AVersionOneManifestsResizesWereMadeWithoutAntialias) {
  const std::string v1_text =
      R"j({"format_version":1,"kind":"stoker-materialized-dataset","source":{"dataset":"d","fingerprint":"xxh3:0",)j"
      R"j("samples":1},"prefix":"resize(8), center_crop(8)","format":"raw","compression":"none","field":"npy",)j"
      R"j("samples":1,"class_names":["a"],"shards":[{"name":"s.tar","samples":1,"bytes":1,"checksum":"x"}],)j"
      R"j("failed":[]})j";
  absl::StatusOr<Manifest> old = ParseManifest(v1_text);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(old->prefix[0].resize().has_antialias());
  EXPECT_FALSE(old->prefix[0].resize().antialias());
  // Written again, it is version 2 and says so in the prefix.
  EXPECT_NE(old->ToJson().find("resize(8, antialias=false)"), std::string::npos) << old->ToJson();
  absl::StatusOr<Manifest> again = ParseManifest(old->ToJson());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->prefix[0].resize().antialias());
  // A version-2 manifest's plain resize antialiases.
  std::string v2_text = v1_text;
  v2_text.replace(v2_text.find("\"format_version\":1"), 18, "\"format_version\":2");
  absl::StatusOr<Manifest> current = ParseManifest(v2_text);
  ASSERT_TRUE(current.ok()) << current.status();
  EXPECT_TRUE(current->prefix[0].resize().antialias());
}

}  // namespace
}  // namespace stoker
