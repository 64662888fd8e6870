// COCO annotations as targets: order, labels, boxes, masks, keypoints, and
// every kind of bad annotation file or annotation.
#include "dataplane/sources/coco_source.h"

#include "dataplane/decode/image_decoder.h"
#include "dataplane/fields/coco_masks.h"
#include "gtest/gtest.h"
#include "tests/testdata/image_set.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TempDir;

// Images 7 (20x10) and 3 (16x12); categories 5 ("dog") and 2 ("cat").
constexpr char kInstances[] = R"({
  "images": [{"id": 7, "file_name": "b.jpg", "width": 20, "height": 10},
             {"id": 3, "file_name": "sub/a.jpg", "width": 16, "height": 12}],
  "categories": [{"id": 5, "name": "dog"}, {"id": 2, "name": "cat", "keypoints": ["nose", "tail"]}],
  "annotations": [
    {"id": 1, "image_id": 3, "category_id": 5, "bbox": [2, 3, 4, 5], "iscrowd": 0,
     "segmentation": [[2, 3, 6, 3, 6, 8, 2, 8]]},
    {"id": 2, "image_id": 3, "category_id": 2, "bbox": [14, 10, 10, 10], "iscrowd": 1,
     "segmentation": {"counts": [5, 10, 177], "size": [12, 16]}, "keypoints": [15, 11, 2, 0, 0, 0]},
    {"id": 3, "image_id": 7, "category_id": 2, "bbox": [1, 1, -2, 3]},
    {"id": 4, "image_id": 7, "category_id": 99, "bbox": [1, 1, 2, 3]},
    {"id": 5, "image_id": 99, "category_id": 2, "bbox": [1, 1, 2, 3]},
    {"id": 6, "image_id": 7, "category_id": 5, "bbox": [0, 0, 5, 5],
     "segmentation": {"counts": "0", "size": [10, 21]}}
  ]})";

class CocoSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("coco/images/b.jpg", testing::EncodeJpeg(testing::SyntheticImage(10, 20, 1), 90));
    dir_.Write("coco/images/sub/a.jpg", testing::EncodeJpeg(testing::SyntheticImage(12, 16, 2), 90));
    dir_.Write("coco/instances.json", kInstances);
  }
  absl::StatusOr<std::shared_ptr<const CocoSource>> Open(int64_t max_bytes = 1 << 20) {
    return CocoSource::Open(dir_.path() / "coco/images", dir_.path() / "coco/instances.json", 0, max_bytes);
  }
  TempDir dir_;
};

TEST_F(CocoSourceTest, ImagesInIdOrderWithContiguousLabelsAndClippedXyxyBoxes) {
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status();
  const CocoSource& s = **source;
  ASSERT_EQ(s.size(), 2);
  EXPECT_EQ(s.Describe(0), "sub/a.jpg");                                 // id 3 before id 7
  EXPECT_EQ(s.class_names(), (std::vector<std::string>{"cat", "dog"}));  // ids 2, 5
  EXPECT_EQ(s.keypoints_per_box(), 2);
  EXPECT_TRUE(s.Read(0).ok());
  SampleTargets t;
  ASSERT_TRUE(s.ReadTargets(0, {true, true, true}, &t).ok());
  EXPECT_EQ(t.boxes, (std::vector<float>{2, 3, 6, 8, 14, 10, 16, 12}));  // the second clipped to 16x12
  EXPECT_EQ(t.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(t.crowd, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(t.keypoints, (std::vector<float>{0, 0, 0, 0, 0, 0, 15, 11, 2, 0, 0, 0}));  // box 1 has none
  ASSERT_EQ(t.instance_masks.size(), 2u);
  // The RLE: 5 zeros, 10 ones, column-major (rows 5..11 of column 0, rows 0..2 of column 1).
  EXPECT_EQ(cv::countNonZero(t.instance_masks[1]), 10);
  EXPECT_EQ(t.instance_masks[1].at<uint8_t>(5, 0), 1);
  EXPECT_EQ(t.instance_masks[1].at<uint8_t>(2, 1), 1);
  EXPECT_EQ(t.instance_masks[1].at<uint8_t>(3, 1), 0);
  // The polygon (2,3)-(6,8): pixels whose centres are inside, columns 2..5, rows 3..7.
  EXPECT_EQ(cv::countNonZero(t.instance_masks[0]), 20);
  EXPECT_EQ(t.instance_masks[0].at<uint8_t>(3, 2), 1);
  EXPECT_EQ(t.instance_masks[0].at<uint8_t>(7, 5), 1);
  EXPECT_EQ(t.instance_masks[0].at<uint8_t>(8, 5), 0);
}

TEST_F(CocoSourceTest, BadAnnotationsAreLeftOutCountedOrFailTheirSample) {
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status();
  const auto& out = (*source)->left_out();
  EXPECT_EQ(out.at("a bbox of negative width or height"), 1);
  EXPECT_EQ(out.at("a category_id that is not a category"), 1);
  EXPECT_EQ(out.at("an image_id that is not an image"), 1);
  SampleTargets boxes_only;
  ASSERT_TRUE((*source)->ReadTargets(1, {true, false, false}, &boxes_only).ok());
  EXPECT_EQ(boxes_only.boxes, (std::vector<float>{0, 0, 5, 5}));
  SampleTargets with_masks;
  absl::Status s = (*source)->ReadTargets(1, {true, true, false}, &with_masks);
  EXPECT_EQ(DecodeFailureOf(s), DecodeFailure::kBadField);
  EXPECT_NE(s.message().find("annotation 6 has an RLE mask of 21x10 for an image of 20x10"), std::string::npos) << s;
}

TEST_F(CocoSourceTest, BadFilesAreRefusedNamingTheFile) {
  struct Case {
    std::string text, expected;
    absl::StatusCode code;
  } cases[] = {
      {"{\"images\": [", "is not valid", absl::StatusCode::kDataLoss},
      {"[]", "is not a JSON object", absl::StatusCode::kDataLoss},
      {R"({"categories": [], "images": []})", "lists no images", absl::StatusCode::kDataLoss},
      {R"({"categories": [], "images": [{"id": 1, "file_name": "../x.jpg", "width": 2, "height": 2}]})",
       "outside its directory", absl::StatusCode::kDataLoss},
      {R"({"categories": [{"id": 1}, {"id": 1}], "images": [{"id": 1, "file_name": "x.jpg", "width": 2, "height": 2}]})",
       "category id 1 twice", absl::StatusCode::kDataLoss},
      {R"({"categories": [], "images": [{"id": 1, "file_name": "x.jpg", "width": "2", "height": 2}]})",
       "integer \"id\", \"width\"", absl::StatusCode::kDataLoss},
      {std::string(2000, ' ') + "{}", "--max-annotation-bytes", absl::StatusCode::kResourceExhausted},
  };
  for (const Case& c : cases) {
    dir_.Write("coco/instances.json", c.text);
    auto source = Open(1000);
    ASSERT_FALSE(source.ok()) << c.text;
    EXPECT_EQ(source.status().code(), c.code) << source.status();
    EXPECT_NE(source.status().message().find(c.expected), std::string::npos) << source.status();
    EXPECT_NE(source.status().message().find("instances.json"), std::string::npos) << source.status();
  }
}

TEST_F(CocoSourceTest, AMillionPointPolygonFailsItsSampleNotTheServer) {
  std::string poly = "[";
  for (int i = 0; i < 600000; ++i) poly += (i ? ",1" : "1");
  poly += "]";
  dir_.Write("coco/instances.json", R"({"categories": [{"id": 1}], "images": [{"id": 1, "file_name": "b.jpg",
    "width": 20, "height": 10}], "annotations": [{"id": 9, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1],
    "segmentation": [)" + poly + "]}]}");
  auto source = Open(int64_t{16} << 20);
  ASSERT_TRUE(source.ok()) << source.status();
  SampleTargets t;
  absl::Status s = (*source)->ReadTargets(0, {true, true, false}, &t);
  EXPECT_EQ(DecodeFailureOf(s), DecodeFailure::kBadField);
  EXPECT_NE(s.message().find("polygons of 600000 coordinates"), std::string::npos) << s;
}

TEST_F(CocoSourceTest, APolygonFarOutsideItsImageOrAHugeMaskFailsItsSample) {
  dir_.Write("coco/instances.json", R"({"categories": [{"id": 1}], "images": [
    {"id": 1, "file_name": "b.jpg", "width": 20, "height": 10},
    {"id": 2, "file_name": "a.jpg", "width": 60000, "height": 60000}], "annotations": [
    {"id": 9, "image_id": 1, "category_id": 1, "bbox": [0, 0, 1, 1], "segmentation": [[0, 0, 1e9, 0, 5, 5]]},
    {"id": 10, "image_id": 2, "category_id": 1, "bbox": [0, 0, 1, 1], "segmentation": [[0, 0, 9, 0, 5, 5]]}]})");
  auto source = Open();
  ASSERT_TRUE(source.ok()) << source.status();
  SampleTargets t;
  absl::Status far = (*source)->ReadTargets(0, {true, true, false}, &t);
  EXPECT_EQ(DecodeFailureOf(far), DecodeFailure::kBadField);
  EXPECT_NE(far.message().find("far outside its image of 20x10"), std::string::npos) << far;
  SampleTargets huge;
  absl::Status big = (*source)->ReadTargets(1, {true, true, false}, &huge);
  EXPECT_EQ(DecodeFailureOf(big), DecodeFailure::kTooLarge) << big;
  EXPECT_TRUE((*source)->ReadTargets(1, {true, false, false}, &huge).ok());  // boxes alone are fine
}

TEST(CocoMasksTest, CompressedRunsDecodeAndBadOnesAreNamed) {
  // COCO's string form of counts [3, 2, 1]: each a 5-bit group ('0' + value).
  absl::StatusOr<RunLengths> runs = DecodeCompressedRuns("321", 3, 2);
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(runs->counts, (std::vector<uint32_t>{3, 2, 1}));
  EXPECT_FALSE(DecodeCompressedRuns("32", 3, 2).ok());          // covers 5 of 6 pixels
  EXPECT_FALSE(DecodeCompressedRuns("3\x7f", 3, 2).ok());       // not in the alphabet
  EXPECT_FALSE(DecodeCompressedRuns("3P", 3, 2).ok());          // ends inside a number ('P' has the continue bit)
  EXPECT_FALSE(DecodeCompressedRuns("ooooooooo1", 3, 2).ok());  // too long a number
}

}  // namespace
}  // namespace stoker

namespace stoker {
namespace {

// Issue 49: a file_name was read as dir/file_name with no check that it
// stays under the data root; a symlink (to a file, or a directory on the
// way) escaped it. Such an image fails its sample, naming the file.
TEST(CocoSourceConfinementTest, AnImageLinkedOutOfTheDataRootFailsItsSample) {
  TempDir outside, root;
  const auto secret = outside.Write("secret.jpg", testing::EncodeJpeg(testing::SyntheticImage(10, 20, 1), 90));
  outside.Write("dir/a.jpg", testing::EncodeJpeg(testing::SyntheticImage(12, 16, 2), 90));
  root.Write("ds/images/inside.jpg", testing::EncodeJpeg(testing::SyntheticImage(10, 20, 3), 90));
  std::filesystem::create_symlink(secret, root.path() / "ds/images/b.jpg");
  std::filesystem::create_symlink(outside.path() / "dir", root.path() / "ds/images/sub");
  std::filesystem::create_symlink(root.path() / "ds/images/inside.jpg", root.path() / "ds/images/c.jpg");
  root.Write("ds/instances.json", R"({
    "images": [{"id": 1, "file_name": "b.jpg", "width": 20, "height": 10},
               {"id": 2, "file_name": "sub/a.jpg", "width": 16, "height": 12},
               {"id": 3, "file_name": "c.jpg", "width": 20, "height": 10}],
    "categories": [{"id": 1, "name": "x"}], "annotations": []})");
  auto source =
      CocoSource::Open(root.path() / "ds/images", root.path() / "ds/instances.json", 0, 1 << 20, nullptr, root.path());
  ASSERT_TRUE(source.ok()) << source.status();
  for (int64_t i : {0, 1}) {
    absl::StatusOr<std::string> bytes = (*source)->Read(i);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kPermissionDenied) << i;
    EXPECT_NE(bytes.status().message().find("resolves outside --data-root"), std::string::npos) << bytes.status();
    EXPECT_NE(bytes.status().message().find((*source)->Describe(i)), std::string::npos) << bytes.status();
  }
  EXPECT_TRUE((*source)->Read(2).ok());  // a link that stays inside is fine
}

// Issue 49: a keypoint of 1e300 was cast to float (undefined behaviour); the
// annotation's keypoints are now left out (counted), as malformed ones are.
TEST(CocoSourceConfinementTest, KeypointsPastFloatsRangeAreLeftOutNotCast) {
  TempDir root;
  root.Write("ds/images/a.jpg", testing::EncodeJpeg(testing::SyntheticImage(10, 20, 1), 90));
  root.Write("ds/instances.json", R"({
    "images": [{"id": 1, "file_name": "a.jpg", "width": 20, "height": 10}],
    "categories": [{"id": 1, "name": "x", "keypoints": ["p"]}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 4, 4], "keypoints": [1e300, 2, 2]},
                    {"id": 2, "image_id": 1, "category_id": 1, "bbox": [2, 2, 4, 4], "keypoints": [3, 4, 2]}]})");
  auto source = CocoSource::Open(root.path() / "ds/images", root.path() / "ds/instances.json", 0, 1 << 20);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->left_out().count("keypoints: a coordinate outside a 32-bit float's range (|x| <= 3.4e38)"), 1u);
  SampleTargets t;
  ASSERT_TRUE((*source)->ReadTargets(0, {false, false, true}, &t).ok());
  EXPECT_EQ(t.keypoints, (std::vector<float>{0, 0, 0, 3, 4, 2}));
}

}  // namespace
}  // namespace stoker
