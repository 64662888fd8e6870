// Sessions with target fields on a COCO dataset: boxes, labels, crowd
// flags, masks and keypoints move with the image through the pipeline and
// arrive as FieldData with item shapes; bad sessions are refused by name.
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/field_layout.h"
#include "common/field_spec.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sessions/data_service_core.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "tests/testdata/image_set.h"
#include "tests/testdata/one_batch.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TempDir;

class TargetsSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One 64x48 image (id 1) with a box and a square polygon, one 40x40 (id 2) without annotations.
    dir_.Write("coco/img/a.jpg", testing::EncodeJpeg(testing::SyntheticImage(48, 64, 1), 90));
    dir_.Write("coco/img/b.jpg", testing::EncodeJpeg(testing::SyntheticImage(40, 40, 2), 90));
    dir_.Write("coco/ann.json", R"({
      "images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48},
                 {"id": 2, "file_name": "b.jpg", "width": 40, "height": 40}],
      "categories": [{"id": 10, "name": "a", "keypoints": ["p"]}, {"id": 20, "name": "b"}],
      "annotations": [{"id": 1, "image_id": 1, "category_id": 20, "bbox": [8, 4, 16, 20], "iscrowd": 0,
                       "segmentation": [[8, 4, 24, 4, 24, 24, 8, 24]], "keypoints": [10, 6, 2]}]})");
    CoreConfig c;
    c.data_root = dir_.path();
    c.workers = 2;
    core_ = std::make_unique<DataServiceCore>(c, &metrics_);
  }

  static v1::SessionConfig Config(const std::string& pipeline_text, const std::string& fields) {
    v1::SessionConfig c;
    c.set_dataset("coco/img");
    c.set_annotations("coco/ann.json");
    c.set_batch_size(2);
    c.set_sequential(true);
    auto ops = ParsePipelineText(pipeline_text);
    EXPECT_TRUE(ops.ok()) << ops.status();
    for (const v1::Op& op : *ops) *c.add_pipeline() = op;
    auto parsed = ParseFieldsText(fields);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    for (const v1::FieldSpec& f : *parsed) *c.add_fields() = f;
    return c;
  }

  FinishedBatch Run(const v1::SessionConfig& config) { return testing::MakeOneBatch(*core_, config, {0, 1}); }

  template <typename T>
  static std::vector<T> Values(const FinishedBatch& b, int field, int sample) {
    return testing::FieldValues<T>(b, field, sample);
  }

  TempDir dir_;
  prometheus::Registry registry_;
  ServerMetrics metrics_{registry_};
  std::unique_ptr<DataServiceCore> core_;
};

TEST_F(TargetsSessionTest, ResizePadAndFlipMoveBoxesMasksAndKeypoints) {
  // 64x48 -> resize_pad(32): scale 0.5 to 32x24, padded to 32x32; then a
  // flip of the whole 32x32 (p = 1).
  const FinishedBatch b =
      Run(Config("resize_pad(32), random_horizontal_flip(1)", "image, boxes, labels, iscrowd, masks, keypoints"));
  ASSERT_TRUE(b.status.ok()) << b.status;
  std::vector<v1::FieldSpec> fields =
      ValueFields(Config("center_crop(8)", "image, boxes, labels, iscrowd, masks, keypoints").fields());
  ASSERT_TRUE(CheckFieldLayout(b.header, fields).ok()) << CheckFieldLayout(b.header, fields);
  EXPECT_EQ(std::vector<int64_t>(b.header.fields(0).item_shape().begin(), b.header.fields(0).item_shape().end()),
            (std::vector<int64_t>{4}));
  EXPECT_EQ(std::vector<int64_t>(b.header.fields(3).item_shape().begin(), b.header.fields(3).item_shape().end()),
            (std::vector<int64_t>{32, 32}));
  // Box (8,4)-(24,24) -> scaled (4,2)-(12,12) -> flipped in x: (20,2)-(28,12).
  EXPECT_EQ(Values<float>(b, 0, 0), (std::vector<float>{20, 2, 28, 12}));
  EXPECT_EQ(Values<int32_t>(b, 1, 0), (std::vector<int32_t>{1}));  // category 20 is label 1
  EXPECT_EQ(Values<int32_t>(b, 2, 0), (std::vector<int32_t>{0}));
  EXPECT_EQ(Values<float>(b, 4, 0), (std::vector<float>{27, 3, 2}));  // keypoint (10, 6) -> (5, 3) -> (27, 3)
  const std::vector<uint8_t> mask = Values<uint8_t>(b, 3, 0);
  ASSERT_EQ(mask.size(), 32u * 32u);
  // The square's pixels, columns 8..23 rows 4..23 at full size, become
  // columns 20..27, rows 2..11 after the scale and flip.
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 32; ++x) {
      EXPECT_EQ(mask[static_cast<size_t>(y * 32 + x)], (x >= 20 && x < 28 && y >= 2 && y < 12) ? 1 : 0)
          << x << "," << y;
    }
  }
  // The image without annotations: no boxes, no masks.
  EXPECT_TRUE(Values<float>(b, 0, 1).empty());
  EXPECT_TRUE(Values<uint8_t>(b, 3, 1).empty());
}

TEST_F(TargetsSessionTest, ACropThatLeavesTheBoxOutDropsItWithItsMaskAndLabel) {
  // center_crop(8) of 64x48 keeps columns 28..35, rows 20..27: the box ends at x = 24.
  const FinishedBatch b = Run(Config("center_crop(8)", "image, boxes, labels, masks"));
  ASSERT_TRUE(b.status.ok()) << b.status;
  EXPECT_TRUE(Values<float>(b, 0, 0).empty());
  EXPECT_TRUE(Values<int32_t>(b, 1, 0).empty());
  EXPECT_TRUE(Values<uint8_t>(b, 2, 0).empty());
}

TEST_F(TargetsSessionTest, IouCropNeedsBoxesAndAnnotatedFieldsNeedAnnotations) {
  auto no_boxes = core_->StartSession(Config("random_iou_crop(), resize_pad(32)", "image, labels"));
  ASSERT_FALSE(no_boxes.ok());
  EXPECT_NE(no_boxes.status().message().find("random_iou_crop chooses its crop by the boxes"), std::string::npos)
      << no_boxes.status();
  v1::SessionConfig no_annotations = Config("resize_pad(32)", "image, boxes");
  no_annotations.clear_annotations();
  no_annotations.set_dataset("synthetic:32x32:4:2");
  auto refused = core_->StartSession(no_annotations);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("comes from annotations"), std::string::npos) << refused.status();
  v1::SessionConfig missing_file = Config("resize_pad(32)", "image, boxes");
  missing_file.set_annotations("coco/nope.json");
  refused = core_->StartSession(missing_file);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsNotFound(refused.status())) << refused.status();
  v1::SessionConfig escaping = Config("resize_pad(32)", "image, boxes");
  escaping.set_annotations("../etc/passwd");
  refused = core_->StartSession(escaping);
  EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  auto with_boxes = core_->StartSession(Config("random_iou_crop(), resize_pad(32)", "image, boxes, labels"));
  EXPECT_TRUE(with_boxes.ok()) << with_boxes.status();
}

TEST_F(TargetsSessionTest, AnnotationsForAnotherImageSizeFailTheSample) {
  // b.jpg is 40x40; claim 80x80 in a second annotation file.
  dir_.Write("coco/ann80.json", R"({"images": [{"id": 2, "file_name": "b.jpg", "width": 80, "height": 80}],
    "categories": [{"id": 1}], "annotations": [{"id": 1, "image_id": 2, "category_id": 1, "bbox": [0, 0, 60, 60]}]})");
  v1::SessionConfig c = Config("resize_pad(32)", "image, boxes");
  c.set_annotations("coco/ann80.json");
  c.set_batch_size(1);
  c.set_bad_sample_policy(v1::FAIL);
  const FinishedBatch out = testing::MakeOneBatch(*core_, c, {0});
  EXPECT_TRUE(absl::IsDataLoss(out.status)) << out.status;
  EXPECT_NE(out.status.message().find("annotations are for an image of 80x80; the image decodes to 40x40"),
            std::string::npos)
      << out.status;
}

TEST_F(TargetsSessionTest, BoxesAreDeterministicPerSeedEpochAndIndex) {
  v1::SessionConfig c = Config(
      "random_resized_crop(24, scale=0.5:1), random_vertical_flip(0.5), "
      "random_horizontal_flip(0.5)",
      "image, boxes, masks");
  c.set_seed(11);
  const FinishedBatch a = Run(c), b = Run(c);
  ASSERT_TRUE(a.status.ok() && b.status.ok());
  EXPECT_EQ(*a.data, *b.data);
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

// images/ + masks/: the mask (palette indices, not colours) follows the pipeline.
class SegmentationSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cv::Mat indices(6, 8, CV_8U);
    for (int y = 0; y < 6; ++y) {
      for (int x = 0; x < 8; ++x) indices.at<uint8_t>(y, x) = static_cast<uint8_t>(x < 4 ? 3 : 250);
    }
    const std::vector<cv::Vec3b> palette(256, cv::Vec3b(10, 20, 30));  // every colour alike: only indices tell
    dir_.Write("seg/images/a.jpg", testing::EncodeJpeg(testing::SyntheticImage(6, 8, 1), 90));
    dir_.Write("seg/masks/a.png", testing::EncodePalettePng(indices, palette));
    dir_.Write("seg/images/sub/b.jpg", testing::EncodeJpeg(testing::SyntheticImage(6, 8, 2), 90));
    dir_.Write("seg/masks/sub/b.png", testing::EncodePalettePng(indices(cv::Rect(0, 0, 8, 5)).clone(), palette));
    dir_.Write("seg/images/c.jpg", testing::EncodeJpeg(testing::SyntheticImage(6, 8, 3), 90));  // no mask
    CoreConfig c;
    c.data_root = dir_.path();
    c.workers = 1;
    core_ = std::make_unique<DataServiceCore>(c, &metrics_);
  }
  FinishedBatch Run(const std::string& fields, std::vector<int64_t> indices) {
    v1::SessionConfig c;
    c.set_dataset("seg");
    c.set_batch_size(4);
    const auto ops = ParsePipelineText("random_horizontal_flip(1), resize_pad(16)");
    for (const v1::Op& op : *ops) *c.add_pipeline() = op;
    const auto parsed = ParseFieldsText(fields);  // kept: the loop must not outlive it
    for (const v1::FieldSpec& f : *parsed) *c.add_fields() = f;
    return testing::MakeOneBatch(*core_, c, indices);
  }
  TempDir dir_;
  prometheus::Registry registry_;
  ServerMetrics metrics_{registry_};
  std::unique_ptr<DataServiceCore> core_;
};

TEST_F(SegmentationSessionTest, PaletteIndicesFollowTheFlipAndTheResize) {
  const FinishedBatch b = Run("image, mask", {0});  // a.jpg (sorted: a.jpg, c.jpg, sub/b.jpg)
  ASSERT_TRUE(b.status.ok()) << b.status;
  ASSERT_EQ(b.header.fields_size(), 1);
  EXPECT_EQ(b.header.fields(0).item_shape(0), 16);
  const std::string region = b.data->substr(static_cast<size_t>(b.header.total_bytes()));
  ASSERT_EQ(region.size(), 256u);
  // 8x6 flipped (250 on the left now), doubled to 16x12, padded to 16x16 with 0.
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) {
      const uint8_t want = y >= 12 ? 0 : (x < 8 ? 250 : 3);
      EXPECT_EQ(static_cast<uint8_t>(region[static_cast<size_t>(y * 16 + x)]), want) << x << "," << y;
    }
  }
}

TEST_F(SegmentationSessionTest, AMissingOrMisSizedMaskFailsItsSample) {
  const FinishedBatch b = Run("image, mask", {1, 2});  // c.jpg has none; sub/b's mask is 8x5 for an 8x6 image
  std::map<int64_t, std::string> reasons;
  for (const auto& f : b.header.failed_samples()) reasons[f.sample_index()] = f.reason();
  EXPECT_EQ(reasons[1].rfind("missing_field: images/c.jpg has no mask", 0), 0u) << reasons[1];
  EXPECT_EQ(reasons[2].rfind("bad_field: a mask of 8x5 does not match its image of 8x6", 0), 0u) << reasons[2];
  auto refused = core_->StartSession([] {
    v1::SessionConfig c;
    c.set_dataset("seg");
    c.set_batch_size(1);
    c.add_pipeline()->mutable_center_crop()->set_size(4);
    const auto parsed = ParseFieldsText("image, caption=txt");
    for (const v1::FieldSpec& f : *parsed) *c.add_fields() = f;
    return c;
  }());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("it has the fields image and mask"), std::string::npos) << refused.status();
}

// The issue's image with 60,000 boxes: 1.2 MB of boxes and labels, past
// what a client accepts of one sample (1 MiB of boxes + 4096 labels). The
// server fails that sample alone as too_large, so SKIP replaces it and the
// batch arrives, instead of the client refusing the batch as DataLoss.
TEST_F(TargetsSessionTest, AnImageWithMoreBoxesThanAClientAcceptsIsATooLargeSample) {
  std::string annotations;
  for (int i = 0; i < 60000; ++i) {
    absl::StrAppend(&annotations, i == 0 ? "" : ",", R"({"id": )", i + 1,
                    R"(, "image_id": 1, "category_id": 20, "bbox": [1, 1, 2, 2], "iscrowd": 0})");
  }
  dir_.Write("many/img/a.jpg", testing::EncodeJpeg(testing::SyntheticImage(48, 64, 1), 90));
  dir_.Write("many/img/b.jpg", testing::EncodeJpeg(testing::SyntheticImage(40, 40, 2), 90));
  dir_.Write("many/ann.json", absl::StrCat(R"({"images": [{"id": 1, "file_name": "a.jpg", "width": 64, "height": 48},
      {"id": 2, "file_name": "b.jpg", "width": 40, "height": 40}],
      "categories": [{"id": 20, "name": "b"}], "annotations": [)",
                                           annotations, "]}"));
  v1::SessionConfig config = Config("resize_pad(32)", "image, boxes, labels");
  config.set_dataset("many/img");
  config.set_annotations("many/ann.json");
  config.set_bad_sample_policy(v1::SKIP);
  const FinishedBatch b = Run(config);
  ASSERT_TRUE(b.status.ok()) << b.status;
  ASSERT_EQ(b.header.failed_samples_size(), 1);
  const v1::FailedSample& f = b.header.failed_samples(0);
  EXPECT_EQ(f.sample_index(), 0);
  EXPECT_EQ(f.replaced_by(), 1);
  EXPECT_NE(f.reason().find("too_large: a.jpg: its fields hold 1200000 bytes (boxes 960000, labels 240000); a sample "
                            "of this session may hold at most 1064960"),
            std::string::npos)
      << f.reason();
  const std::vector<v1::FieldSpec> fields = ValueFields(config.fields());
  EXPECT_LE(b.header.field_bytes(), 2 * MaxSampleFieldBytes(fields, config, 32, 32));
  EXPECT_GE(metrics_.SamplesFailed("too_large").Value(), 1);

  config.set_bad_sample_policy(v1::FAIL);
  const FinishedBatch failed = Run(config);
  EXPECT_TRUE(absl::IsDataLoss(failed.status)) << failed.status;
  EXPECT_NE(failed.status.message().find("its fields hold 1200000 bytes"), std::string::npos) << failed.status;
}

}  // namespace
}  // namespace stoker
