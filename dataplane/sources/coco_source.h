// A COCO-style detection dataset as a sample source: a directory of images
// and an instances JSON file (torchvision's CocoDetection(root, annFile)).
// Samples are the images in increasing id order (as CocoDetection); each
// has its annotations as targets: boxes (xywh in the file, xyxy here,
// clipped to the image), labels (category ids mapped to 0..K-1 in
// increasing id order; class_names are the categories' names), crowd flags,
// keypoints, and instance masks from polygons or RLE, made as pycocotools'
// annToMask makes them (coco_masks.h). Immutable after Open; thread-safe.
#ifndef STOKER_DATAPLANE_SOURCES_COCO_SOURCE_H_
#define STOKER_DATAPLANE_SOURCES_COCO_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/sample/sample_source.h"

namespace stoker {

// Limits on what one annotation file may make the server hold; part of the
// documented contract.
inline constexpr int64_t kMaxPolygonCoordinates = 100'000;  // per annotation, all its polygons
inline constexpr int kMaxCocoCategories = 100'000;
// Polygon points may lie at most this far outside their image (in image
// sizes); farther ones mark the annotation bad (pycocotools would walk
// billions of boundary points).
inline constexpr double kMaxPolygonReach = 1.0;
// Bytes of instance masks one sample may make (all its annotations at full
// resolution); more fails the sample as too_large.
inline constexpr int64_t kMaxMaskBytesPerSample = int64_t{256} << 20;
// Keypoints a category may name; boundary points all of one sample's
// polygons may walk on pycocotools' grid.
inline constexpr int kMaxKeypointsPerBox = 1024;
inline constexpr int64_t kMaxBoundaryPointsPerSample = int64_t{1} << 24;

class CocoSource final : public SampleSource {
 public:
  // Reads `annotations` (at most `max_annotation_bytes`) and indexes the
  // images under `image_dir`. DATA_LOSS names the file and what is wrong
  // with it as a whole (not JSON, no images, a field of the wrong type);
  // single bad annotations (a box of negative size, an unknown image or
  // category, a polygon over kMaxPolygonCoordinates) are left out or marked
  // and counted in the log. Image files are read lazily (a missing one fails
  // its sample as read_error); larger than `max_file_bytes` (0: none) fail
  // as too_large. An image whose path resolves (through a symlink) outside
  // `data_root` (empty: `image_dir`) fails its sample as read_error with
  // PERMISSION_DENIED, as the class-folder and segmentation scans skip such
  // directories.
  static absl::StatusOr<std::shared_ptr<const CocoSource>> Open(const std::filesystem::path& image_dir,
                                                                const std::filesystem::path& annotations,
                                                                int64_t max_file_bytes, int64_t max_annotation_bytes,
                                                                const std::atomic<bool>* cancelled = nullptr,
                                                                const std::filesystem::path& data_root = {});

  int64_t size() const override { return static_cast<int64_t>(images_.size()); }
  const std::vector<std::string>& class_names() const override { return class_names_; }
  // Images have no class of their own: 0 (all are "unlabeled").
  int32_t label(int64_t) const override { return 0; }
  std::string Describe(int64_t index) const override { return images_[static_cast<size_t>(index)].file_name; }
  absl::StatusOr<std::string> Read(int64_t index) const override;
  const std::string& fingerprint() const override { return fingerprint_; }
  int64_t unlabeled_samples() const override { return size(); }
  bool has_annotations() const override { return true; }
  int keypoints_per_box() const override { return keypoints_per_box_; }
  absl::Status ReadTargets(int64_t index, const TargetNeeds& needs, SampleTargets* targets) const override;

  // Annotations left out at open, by reason (for logs and tests).
  const std::map<std::string, int64_t>& left_out() const { return left_out_; }

 private:
  CocoSource() = default;

  struct Image {
    std::string file_name;
    int width = 0, height = 0;
    int64_t first_annotation = 0, annotations = 0;
  };
  enum class Segmentation : uint8_t { kNone, kPolygons, kCompressedRle, kCountsRle, kBad };
  struct Annotation {
    int64_t id = 0;
    float box[4] = {0, 0, 0, 0};  // xyxy
    int32_t label = 0;
    uint8_t crowd = 0;
    Segmentation segmentation = Segmentation::kNone;
    int rle_height = 0, rle_width = 0;
    int64_t first = 0, count = 0;  // polygons: into polygon_sizes_; RLE: into rle_chars_ / rle_counts_
    int64_t first_coordinate = 0;  // polygons: into polygon_coordinates_
    int64_t first_keypoint = -1;   // into keypoints_ (3 * keypoints_per_box_ floats), -1: none
  };
  friend class CocoIndexer;

  std::filesystem::path dir_;
  std::filesystem::path root_;  // canonical: every image must resolve under it
  int64_t max_file_bytes_ = 0;
  std::string fingerprint_;
  std::vector<std::string> class_names_;
  std::vector<Image> images_;
  std::vector<Annotation> annotations_;
  std::vector<double> polygon_coordinates_;
  std::vector<int64_t> polygon_sizes_;  // coordinates per polygon
  std::string rle_chars_;
  std::vector<uint32_t> rle_counts_;
  std::vector<float> keypoints_;
  int keypoints_per_box_ = 0;
  std::map<int64_t, std::string> bad_segmentations_;  // annotation index -> why
  std::map<std::string, int64_t> left_out_;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SOURCES_COCO_SOURCE_H_
