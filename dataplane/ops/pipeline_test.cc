#include "dataplane/ops/pipeline.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"
#include "gtest/gtest.h"
#include "tests/testdata/image_set.h"

namespace stoker {
namespace {

v1::SessionConfig Config(const std::string& pipeline, int batch_size = 8) {
  v1::SessionConfig c;
  c.set_dataset("ds");
  c.set_batch_size(batch_size);
  auto ops = ParsePipelineText(pipeline);
  EXPECT_TRUE(ops.ok()) << ops.status();
  for (auto& op : *ops) *c.add_pipeline() = op;
  return c;
}

TEST(PipelineTest, ValidPipelinesGiveFixedGeometry) {
  auto p = Pipeline::Create(Config("resize(256), center_crop(224)"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->out_height(), 224);
  EXPECT_EQ(p->sample_bytes(), 224 * 224 * 3);
  EXPECT_EQ(p->SampleShape(), (std::vector<int64_t>{224, 224, 3}));
  auto q = Pipeline::Create(Config("random_resized_crop(160), random_horizontal_flip(0.5)"));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->out_width(), 160);
}

TEST(PipelineTest, InvalidConfigsNameTheFieldAndRange) {
  struct Case {
    v1::SessionConfig config;
    std::string fragment;
  };
  v1::SessionConfig bad_dtype = Config("center_crop(8)");
  bad_dtype.set_dtype(static_cast<v1::DType>(7));
  v1::SessionConfig bad_layout = Config("center_crop(8)");
  bad_layout.set_layout(static_cast<v1::Layout>(9));
  v1::SessionConfig unset_op = Config("center_crop(8)");
  unset_op.add_pipeline();
  v1::SessionConfig empty = Config("center_crop(8)");
  empty.clear_pipeline();
  v1::SessionConfig long_pipeline = Config("center_crop(8)");
  for (int i = 0; i < 5000; ++i) long_pipeline.add_pipeline()->mutable_random_horizontal_flip();
  const Case cases[] = {
      {long_pipeline, "the pipeline has 5001 ops; at most 1024 are allowed"},
      {Config("center_crop(8)", 0), "batch_size = 0; allowed range is 1..65536"},
      {Config("center_crop(8)", 65537), "batch_size = 65537"},
      {Config("resize(256)"), "not fixed"},
      {Config("center_crop(224), resize(256)"), "not fixed"},
      {Config("center_crop(0)"), "pipeline[0].center_crop.size = 0; allowed range is 1..8192"},
      {Config("random_resized_crop(9000)"), "random_resized_crop.size = 9000"},
      {Config("random_resized_crop(224, scale=0.5:0.2)"), "pipeline[0].random_resized_crop.scale"},
      {Config("random_resized_crop(224, ratio=-1:2)"), "random_resized_crop.ratio"},
      {Config("center_crop(8), random_horizontal_flip(1.5)"), "pipeline[1].random_horizontal_flip.p = 1.5"},
      {Config("resize(0), center_crop(8)"), "pipeline[0].resize.shorter_side"},
      {bad_dtype, "dtype = 7"},
      {bad_layout, "layout = 9"},
      {unset_op, "pipeline[1] has no op set"},
      {empty, "pipeline is empty"},
  };
  for (const Case& c : cases) {
    auto p = Pipeline::Create(c.config);
    ASSERT_FALSE(p.ok()) << c.fragment;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(c.fragment), std::string::npos) << p.status();
  }
}

v1::SessionConfig WithDtype(v1::SessionConfig c, v1::DType dtype) {
  c.set_dtype(dtype);
  return c;
}

v1::SessionConfig WithNormalize(v1::SessionConfig c, std::vector<float> mean, std::vector<float> std) {
  v1::Normalize* n = c.add_pipeline()->mutable_normalize();
  for (float m : mean) n->add_mean(m);
  for (float v : std) n->add_std(v);
  return c;
}

TEST(PipelineTest, DtypeNormalizeAndJitterValidation) {
  const std::pair<v1::SessionConfig, std::string> cases[] = {
      {WithNormalize(Config("center_crop(8)"), {0.5f, 0.5f, 0.5f}, {1, 1, 1}), "needs dtype FLOAT16 or FLOAT32"},
      {WithDtype(WithNormalize(Config("center_crop(8)"), {0.5f, 0.5f}, {1, 1}), v1::FLOAT32), "need 3 of each"},
      {WithDtype(WithNormalize(Config("center_crop(8)"), {0, 0, 0}, {1, 0, 1}), v1::FLOAT32), "std has 0"},
      {[] {
         auto c = WithDtype(WithNormalize(Config("center_crop(8)"), {0, 0, 0}, {1, 1, 1}), v1::FLOAT32);
         c.add_pipeline()->mutable_random_horizontal_flip()->set_p(0.5f);
         return c;
       }(),
       "normalize must be the last op"},
      {[] {
         auto c = Config("center_crop(8)");
         c.add_pipeline()->mutable_color_jitter()->set_hue(0.6f);
         return c;
       }(),
       "hue in 0..0.5"},
      {WithDtype(Config("center_crop(4096)", 16), v1::FLOAT32), "a batch may hold at most"},
  };
  for (const auto& [config, fragment] : cases) {
    auto p = Pipeline::Create(config);
    ASSERT_FALSE(p.ok()) << fragment;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(fragment), std::string::npos) << p.status();
  }
}

TEST(PipelineTest, FloatOutputsNormalizeInEitherLayout) {
  const cv::Mat px(2, 2, CV_8UC3, cv::Scalar(255, 0, 51));
  for (v1::DType dtype : {v1::FLOAT32, v1::FLOAT16}) {
    for (v1::Layout layout : {v1::NHWC, v1::NCHW}) {
      auto c = WithDtype(WithNormalize(Config("center_crop(2)"), {0.5f, 0.5f, 0.5f}, {0.5f, 0.25f, 0.2f}), dtype);
      c.set_layout(layout);
      auto p = Pipeline::Create(c);
      ASSERT_TRUE(p.ok()) << p.status();
      ASSERT_EQ(p->sample_bytes(), 2 * 2 * 3 * (dtype == v1::FLOAT32 ? 4 : 2));
      std::vector<uint8_t> out(static_cast<size_t>(p->sample_bytes()));
      ASSERT_TRUE(p->Store(px, out.data()).ok());
      cv::Mat values(1, 12, dtype == v1::FLOAT32 ? CV_32F : CV_16F, out.data()), f;
      values.convertTo(f, CV_32F);
      // (1 - 0.5) / 0.5 = 1, (0 - 0.5) / 0.25 = -2, (0.2 - 0.5) / 0.2 = -1.5
      const float expected[3] = {1.0f, -2.0f, -1.5f};
      for (int i = 0; i < 12; ++i) {
        const int channel = layout == v1::NHWC ? i % 3 : i / 4;
        EXPECT_NEAR(f.at<float>(0, i), expected[channel], 1e-3) << i;
      }
    }
  }
  // Without normalize, floats are value / 255.
  auto plain = Pipeline::Create(WithDtype(Config("center_crop(2)"), v1::FLOAT32));
  ASSERT_TRUE(plain.ok());
  std::vector<float> out(12);
  ASSERT_TRUE(plain->Store(px, reinterpret_cast<uint8_t*>(out.data())).ok());
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[2], 0.2f);
}

// A PNG with an eXIf chunk saying "rotate 90° clockwise" (orientation 6).
std::string PngWithExifOrientation(const cv::Mat& rgb) {
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  std::vector<uint8_t> png;
  cv::imencode(".png", bgr, png);
  const std::string exif("MM\0*\0\0\0\x08\0\x01\x01\x12\0\x03\0\0\0\x01\0\x06\0\0\0\0\0\0", 26);
  auto crc = [](const std::string& bytes) {
    uint32_t c = 0xffffffffu;
    for (unsigned char b : bytes) {
      c ^= b;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
  };
  auto be32 = [](uint32_t v) { return std::string{char(v >> 24), char(v >> 16), char(v >> 8), char(v)}; };
  const std::string body = "eXIf" + exif;
  const std::string chunk = be32(static_cast<uint32_t>(exif.size())) + body + be32(crc(body));
  std::string out(png.begin(), png.end());
  out.insert(8 + 25, chunk);  // after the signature and IHDR
  return out;
}

// Review 1.8: OpenCV rotated EXIF-oriented PNGs while the fused crop came
// from the header's (unrotated) size, and Store copied rows past the smaller
// result. Orientation is now ignored, as PIL does.
TEST(PipelineTest, ExifOrientedPngIsNotRotated) {
  const cv::Mat src = testing::SyntheticImage(20, 40, 5);
  const std::string png = PngWithExifOrientation(src);
  auto decoded = DecodeImage(png);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->size(), src.size());
  EXPECT_EQ(cv::norm(*decoded, src, cv::NORM_INF), 0);
  auto p = Pipeline::Create(Config("center_crop(16)"));
  ASSERT_TRUE(p.ok());
  std::vector<uint8_t> out(static_cast<size_t>(p->sample_bytes())), reference(out.size());
  Rng a = Rng::ForSample(1, 0, 0), b = Rng::ForSample(1, 0, 0);
  SampleTimes times;
  ASSERT_TRUE(p->Produce(png, a, 0, out.data(), &times).ok());
  ASSERT_TRUE(p->Store(*p->Apply(src.clone(), b), reference.data()).ok());
  EXPECT_EQ(out, reference);
}

TEST(PipelineTest, StoreRefusesAnImageOfTheWrongGeometry) {
  auto p = Pipeline::Create(Config("center_crop(16)"));
  ASSERT_TRUE(p.ok());
  std::vector<uint8_t> out(static_cast<size_t>(p->sample_bytes()));
  const absl::Status status = p->Store(cv::Mat(16, 12, CV_8UC3, cv::Scalar(1, 2, 3)), out.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("12x16"), std::string::npos) << status;
  EXPECT_FALSE(p->Store(cv::Mat(16, 16, CV_8UC1), out.data()).ok());
}

// Review 1.11: the output of a resize had no limit; resize(8192) of a 100:1
// panorama asked for a multi-gigabyte intermediate (and truncated to int).
TEST(PipelineTest, AResizeWhoseOutputExceedsThePixelLimitIsTooLarge) {
  const cv::Mat panorama = testing::SyntheticImage(10, 1000, 3);  // 100:1
  const std::string png = [&] {
    std::vector<uint8_t> buf;
    cv::Mat bgr;
    cv::cvtColor(panorama, bgr, cv::COLOR_RGB2BGR);
    cv::imencode(".png", bgr, buf);
    return std::string(buf.begin(), buf.end());
  }();
  for (const char* text : {"resize(8192), center_crop(64)", "resize(10), resize(8192), center_crop(64)"}) {
    auto p = Pipeline::Create(Config(text));
    ASSERT_TRUE(p.ok()) << p.status();
    std::vector<uint8_t> out(static_cast<size_t>(p->sample_bytes()));
    Rng rng = Rng::ForSample(1, 0, 0);
    SampleTimes times;
    // 8192 x 819200 pixels would be 6.7e9; the limit is 1e8.
    const absl::Status status = p->Produce(png, rng, 100'000'000, out.data(), &times);
    EXPECT_EQ(DecodeFailureOf(status), DecodeFailure::kTooLarge) << text << ": " << status;
    EXPECT_NE(status.message().find("resize(8192)"), std::string::npos) << status;
  }
  // Within the limit the same pipeline works.
  auto small = Pipeline::Create(Config("resize(64), center_crop(64)"));
  ASSERT_TRUE(small.ok());
  std::vector<uint8_t> out(static_cast<size_t>(small->sample_bytes()));
  Rng rng = Rng::ForSample(1, 0, 0);
  SampleTimes times;
  EXPECT_TRUE(small->Produce(png, rng, 100'000'000, out.data(), &times).ok());
}

// The fused path (region decode) must give the same bytes as decoding the
// whole image and running the ops, when no DCT scaling is involved.
TEST(PipelineTest, FusedDecodeMatchesFullDecodeThenOps) {
  const std::string jpeg = testing::EncodeJpeg(testing::SyntheticImage(280, 300, 11), 90);
  auto full = DecodeImage(jpeg);
  ASSERT_TRUE(full.ok());
  for (const char* text : {"random_resized_crop(224), random_horizontal_flip(0.5)", "center_crop(200)"}) {
    auto p = Pipeline::Create(Config(text));
    ASSERT_TRUE(p.ok()) << p.status();
    for (uint64_t seed = 0; seed < 8; ++seed) {
      std::vector<uint8_t> fused(static_cast<size_t>(p->sample_bytes())), reference(fused.size());
      Rng a = Rng::ForSample(seed, 0, 3), b = Rng::ForSample(seed, 0, 3);
      SampleTimes times;
      ASSERT_TRUE(p->Produce(jpeg, a, 0, fused.data(), &times).ok());
      ASSERT_TRUE(p->Store(*p->Apply(full->clone(), b), reference.data()).ok());
      EXPECT_EQ(fused, reference) << text << " seed " << seed;
    }
  }
}

// The fusion is the entry's: the decode-and-crop first ops say how they
// fuse (OpEntry::fused), the others have no fused form, and a center crop
// larger than the image declines, leaving the image to its apply (padding).
TEST(PipelineTest, AFirstOpFusesThroughItsEntry) {
  for (v1::Op::OpCase op : {v1::Op::kRandomResizedCrop, v1::Op::kCenterCrop, v1::Op::kResize}) {
    ASSERT_NE(FindOp(op), nullptr);
    EXPECT_NE(FindOp(op)->fused.plan, nullptr) << op;
  }
  // The crops that resize finish on the decoded pixels; a center crop is done by the decoder.
  EXPECT_NE(FindOp(v1::Op::kRandomResizedCrop)->fused.finish, nullptr);
  EXPECT_NE(FindOp(v1::Op::kResize)->fused.finish, nullptr);
  EXPECT_EQ(FindOp(v1::Op::kCenterCrop)->fused.finish, nullptr);
  EXPECT_EQ(FindOp(v1::Op::kRandomHorizontalFlip)->fused.plan, nullptr);
  EXPECT_EQ(FindOp(v1::Op::kPad)->fused.plan, nullptr);
  const std::vector<v1::Op> crop = *ParsePipelineText("center_crop(200)");
  Rng rng(1);
  CropBox region;
  int scale = 8;
  EXPECT_TRUE(FindOp(v1::Op::kCenterCrop)->fused.plan(crop[0], 280, 300, rng, &region, &scale));
  EXPECT_EQ(region, (CropBox{40, 50, 200, 200}));
  region = CropBox();
  EXPECT_FALSE(FindOp(v1::Op::kCenterCrop)->fused.plan(crop[0], 150, 300, rng, &region, &scale));
  EXPECT_EQ(region.width, 0) << "declined: nothing to decode apart";
  // A small image is padded by apply, through the same pipeline.
  const std::string small = testing::EncodeJpeg(testing::SyntheticImage(150, 300, 3), 90);
  auto p = Pipeline::Create(Config("center_crop(200)"));
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<uint8_t> out(static_cast<size_t>(p->sample_bytes())), reference(out.size());
  Rng a(1), b(1);
  SampleTimes times;
  ASSERT_TRUE(p->Produce(small, a, 0, out.data(), &times).ok());
  ASSERT_TRUE(p->Store(*p->Apply(DecodeImage(small)->clone(), b), reference.data()).ok());
  EXPECT_EQ(out, reference);
}

TEST(PipelineTest, DctScaledResizeStaysCloseToFullDecode) {
  const std::string jpeg = testing::EncodeJpeg(testing::SyntheticImage(280, 300, 12), 95);
  auto full = DecodeImage(jpeg);
  auto p = Pipeline::Create(Config("resize(64), center_crop(56)"));  // 280 >= 4 x 64: decoded at 1/4
  ASSERT_TRUE(p.ok());
  std::vector<uint8_t> fused(static_cast<size_t>(p->sample_bytes())), reference(fused.size());
  Rng a(1), b(1);
  SampleTimes times;
  ASSERT_TRUE(p->Produce(jpeg, a, 0, fused.data(), &times).ok());
  // Reference: full decode, area-shrink (what a good resize does), crop.
  cv::Mat shrunk;
  cv::resize(*full, shrunk, cv::Size(68, 64), 0, 0, cv::INTER_AREA);
  ASSERT_TRUE(p->Store(*p->Apply(shrunk, b, 1), reference.data()).ok());
  double diff = 0;
  for (size_t i = 0; i < fused.size(); ++i) diff += std::abs(int{fused[i]} - int{reference[i]});
  EXPECT_LT(diff / static_cast<double>(fused.size()), 4.0);
}

TEST(PipelineTest, ApplyIsDeterministicPerGeneratorAndFlipMirrors) {
  cv::Mat img(40, 60, CV_8UC3);
  cv::randu(img, 0, 255);
  auto p = Pipeline::Create(Config("random_resized_crop(16)"));
  ASSERT_TRUE(p.ok());
  Rng a = Rng::ForSample(1, 0, 5), b = Rng::ForSample(1, 0, 5);
  cv::Mat x = *p->Apply(img, a), y = *p->Apply(img, b);
  EXPECT_EQ(cv::norm(x, y, cv::NORM_INF), 0);

  auto flip = Pipeline::Create(Config("center_crop(20), random_horizontal_flip(1)"));
  auto plain = Pipeline::Create(Config("center_crop(20)"));
  Rng r1(0), r2(0);
  cv::Mat flipped = *flip->Apply(img, r1), straight = *plain->Apply(img, r2);
  cv::Mat mirrored;
  cv::flip(straight, mirrored, 1);
  EXPECT_EQ(cv::norm(flipped, mirrored, cv::NORM_INF), 0);
}

TEST(PipelineTest, StoreWritesNhwcAndNchw) {
  cv::Mat img(1, 2, CV_8UC3);
  img.at<cv::Vec3b>(0, 0) = {1, 2, 3};
  img.at<cv::Vec3b>(0, 1) = {4, 5, 6};
  v1::SessionConfig c;
  c.set_batch_size(1);
  c.add_pipeline()->mutable_center_crop()->set_size(1);
  auto nhwc = Pipeline::Create(c);
  ASSERT_TRUE(nhwc.ok());
  // Store uses out_height x out_width, so build 1x2 geometry through a crop of
  // size 1 and check a 1x1 store, then NCHW on the same pixel.
  uint8_t out[3];
  ASSERT_TRUE(nhwc->Store(img(cv::Rect(1, 0, 1, 1)).clone(), out).ok());
  EXPECT_EQ(std::vector<uint8_t>(out, out + 3), (std::vector<uint8_t>{4, 5, 6}));

  c.mutable_pipeline(0)->mutable_center_crop()->set_size(2);
  c.set_layout(v1::NCHW);
  auto nchw = Pipeline::Create(c);
  ASSERT_TRUE(nchw.ok());
  cv::Mat two(2, 2, CV_8UC3);
  two.at<cv::Vec3b>(0, 0) = {1, 2, 3};
  two.at<cv::Vec3b>(0, 1) = {4, 5, 6};
  two.at<cv::Vec3b>(1, 0) = {7, 8, 9};
  two.at<cv::Vec3b>(1, 1) = {10, 11, 12};
  uint8_t planar[12];
  ASSERT_TRUE(nchw->Store(two, planar).ok());
  EXPECT_EQ(std::vector<uint8_t>(planar, planar + 12), (std::vector<uint8_t>{1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12}));
  EXPECT_EQ(nchw->SampleShape(), (std::vector<int64_t>{3, 2, 2}));
}

// The rules of place and of the session are their entries' (OpRules), and
// the messages say them in the entries' words.
TEST(PipelineTest, PlaceAndSessionRulesAreTheEntriesWords) {
  const OpEntry* clip = FindOp(v1::Op::kVideoClip);
  const OpEntry* normalize = FindOp(v1::Op::kNormalize);
  const OpEntry* iou = FindOp(v1::Op::kRandomIouCrop);
  const OpEntry* augmix = FindOp(v1::Op::kAugmix);
  ASSERT_TRUE(clip != nullptr && normalize != nullptr && iou != nullptr && augmix != nullptr);
  ASSERT_EQ(clip->rules.place, OpRules::kFirst);
  ASSERT_EQ(normalize->rules.place, OpRules::kLast);
  ASSERT_TRUE(clip->rules.place_why != nullptr && normalize->rules.float_why != nullptr &&
              iou->rules.boxes_why != nullptr && augmix->rules.refused_why != nullptr);
  EXPECT_EQ(augmix->targets, OpTargets::kRefused);
  auto error = [](v1::SessionConfig c) {
    absl::StatusOr<Pipeline> p = Pipeline::Create(c);
    return p.ok() ? std::string("created") : std::string(p.status().message());
  };
  auto with_field = [](v1::SessionConfig c, v1::FieldKind kind) {
    v1::FieldSpec* f = c.add_fields();
    f->set_name("f");
    f->set_kind(kind);
    return c;
  };
  EXPECT_EQ(error(Config("center_crop(8), video_clip()")),
            absl::StrCat("pipeline[1].video_clip must be the first op: ", clip->rules.place_why));
  // Before its own checks: a misplaced video_clip with a bad argument is told its place.
  auto bad_clip = Config("center_crop(8)");
  bad_clip.add_pipeline()->mutable_video_clip()->set_frames(100000);
  EXPECT_EQ(error(bad_clip), absl::StrCat("pipeline[1].video_clip must be the first op: ", clip->rules.place_why));
  auto not_last = WithDtype(WithNormalize(Config("center_crop(8)"), {0, 0, 0}, {1, 1, 1}), v1::FLOAT32);
  not_last.add_pipeline()->mutable_random_horizontal_flip();
  EXPECT_EQ(error(not_last), "pipeline[1].normalize must be the last op");
  EXPECT_EQ(error(WithNormalize(Config("center_crop(8)"), {0, 0, 0}, {1, 1, 1})),
            absl::StrCat("pipeline[1].normalize needs dtype FLOAT16 or FLOAT32 (", normalize->rules.float_why, ")"));
  EXPECT_EQ(
      error(with_field(Config("random_iou_crop(), resize_pad(32)"), v1::CLASS)),
      absl::StrCat("pipeline[0].random_iou_crop ", iou->rules.boxes_why, ": the session needs a field of kind boxes"));
  EXPECT_EQ(error(with_field(Config("random_iou_crop(), resize_pad(32)"), v1::BOXES)), "created");
  EXPECT_EQ(error(with_field(Config("center_crop(8), augmix()"), v1::BOXES)),
            absl::StrCat("pipeline[1].augmix cannot move boxes, masks or keypoints (", augmix->rules.refused_why,
                         "): a session with target fields cannot use it"));
  EXPECT_EQ(error(Config("center_crop(8), augmix()")), "created");
  // The media ops are never in a stored prefix, and normalize makes floats.
  for (v1::Op::OpCase media : {v1::Op::kVideoClip, v1::Op::kAudio, v1::Op::kMelSpectrogram}) {
    ASSERT_NE(FindOp(media), nullptr);
    EXPECT_NE(FindOp(media)->rules.prefix_why, nullptr) << media;
  }
  v1::Op op;
  op.mutable_normalize();
  EXPECT_TRUE(MakesFloats(op));
  op.mutable_center_crop();
  EXPECT_FALSE(MakesFloats(op));
}

TEST(PipelineTest, APrefixRefusesRandomOpsAndNormalizeNamingThem) {
  struct Case {
    std::string text, fragment;
  };
  for (const Case& c :
       std::vector<Case>{{"resize(256), random_resized_crop(224)", "prefix[1] random_resized_crop(224"},
                         {"random_horizontal_flip(0.5)", "prefix[0] random_horizontal_flip"},
                         {"center_crop(224), color_jitter(0.4)", "prefix[1] color_jitter"},
                         {"resize(256), normalize(mean=0.485:0.456:0.406, std=0.229:0.224:0.225), center_crop(224)",
                          "prefix[1] normalize must be the last op of the prefix"},
                         {"resize(0)", "prefix[0].resize.shorter_side = 0"},
                         {"video_clip(4)", ": audio and video pipelines are not materialised"},
                         {"center_crop(8), audio()", "prefix[1] audio("}}) {
    absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(c.text);
    ASSERT_TRUE(ops.ok()) << c.text << ": " << ops.status();
    absl::StatusOr<Pipeline> p = Pipeline::CreatePrefix(*ops);
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(c.fragment), std::string::npos) << p.status();
  }
  absl::StatusOr<Pipeline> ok = Pipeline::CreatePrefix(*ParsePipelineText("resize(256), center_crop(224)"));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->ops().size(), 2u);
  EXPECT_TRUE(Pipeline::CreatePrefix(*ParsePipelineText("resize(256)")).ok());  // output size need not be fixed
  absl::StatusOr<Pipeline> floats = Pipeline::CreatePrefix(
      *ParsePipelineText("resize(256), normalize(mean=0.485:0.456:0.406, std=0.229:0.224:0.225)"));
  ASSERT_TRUE(floats.ok()) << floats.status();  // stored as float32 pixels
  EXPECT_TRUE(floats->normalizes());
  EXPECT_EQ(floats->dtype(), v1::FLOAT32);
}

// What a materialised dataset relies on: the prefix run offline, then the
// rest run online from its output, gives the bytes the whole pipeline gives.
TEST(PipelineTest, APrefixThenTheRestEqualsTheWholePipeline) {
  const std::string jpeg = testing::EncodeJpeg(testing::SyntheticImage(300, 420, 5), 90);
  const std::string text = "resize(128), center_crop(112), random_horizontal_flip(0.5)";
  absl::StatusOr<Pipeline> whole = Pipeline::Create(Config(text));
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::vector<v1::Op> all = *ParsePipelineText(text);
  for (size_t k = 1; k <= 2; ++k) {
    absl::StatusOr<Pipeline> prefix = Pipeline::CreatePrefix({all.begin(), all.begin() + k});
    ASSERT_TRUE(prefix.ok());
    for (uint64_t seed = 0; seed < 4; ++seed) {  // flips and not
      std::vector<uint8_t> online(whole->sample_bytes()), split(whole->sample_bytes());
      Rng r1 = Rng::ForSample(seed, 0, 3);
      SampleTimes t;
      ASSERT_TRUE(whole->Produce(jpeg, r1, 0, online.data(), &t).ok());
      Rng r0(seed);
      absl::StatusOr<cv::Mat> stored = prefix->DecodeAndApply(jpeg, r0, 0, 0, &t);
      ASSERT_TRUE(stored.ok()) << stored.status();
      Rng r2 = Rng::ForSample(seed, 0, 3);
      absl::StatusOr<cv::Mat> rest = whole->Apply(stored->clone(), r2, k);
      ASSERT_TRUE(rest.ok());
      ASSERT_TRUE(whole->Store(*rest, split.data()).ok());
      EXPECT_EQ(online, split) << "prefix of " << k << " ops, seed " << seed;
    }
  }
}

}  // namespace
}  // namespace stoker
