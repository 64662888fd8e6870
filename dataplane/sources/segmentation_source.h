// A semantic segmentation dataset as a sample source: a directory holding
// exactly two subdirectories, images/ and masks/, where masks/STEM.png is the
// per-pixel class image of images/STEM.* (the layout VOC, ADE20K and
// Cityscapes come in after renaming; STEM may have subdirectories). Samples
// are the images in sorted path order. A mask is read losslessly (palette
// indices or 8-bit gray, libpng) as the target `mask`; an image without one
// fails its sample as missing_field when the mask is asked for. Immutable
// after Open; thread-safe.
#ifndef STOKER_DATAPLANE_SOURCES_SEGMENTATION_SOURCE_H_
#define STOKER_DATAPLANE_SOURCES_SEGMENTATION_SOURCE_H_

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/sample/sample_source.h"

namespace stoker {

// True when `dir` holds the subdirectories images/ and masks/ and nothing
// else but files (an ImageFolder tree with classes named so would have more
// classes, or a class of masks without images).
bool IsSegmentationLayout(const std::filesystem::path& dir);

class SegmentationSource final : public SampleSource {
 public:
  // NOT_FOUND when images/ has no image. Files that link outside `data_root`
  // are skipped. Reads over `max_file_bytes` (0: none) are too_large.
  static absl::StatusOr<std::shared_ptr<const SegmentationSource>> Open(const std::filesystem::path& dir,
                                                                        const std::filesystem::path& data_root,
                                                                        int64_t max_file_bytes,
                                                                        const std::atomic<bool>* cancelled = nullptr);

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  const std::vector<std::string>& class_names() const override { return class_names_; }
  int32_t label(int64_t) const override { return 0; }
  std::string Describe(int64_t index) const override { return "images/" + samples_[static_cast<size_t>(index)].image; }
  absl::StatusOr<std::string> Read(int64_t index) const override;
  const std::string& fingerprint() const override { return fingerprint_; }
  int64_t unlabeled_samples() const override { return size(); }
  bool has_masks() const override { return true; }
  absl::Status ReadTargets(int64_t index, const TargetNeeds& needs, SampleTargets* targets) const override;

 private:
  SegmentationSource() = default;
  struct Sample {
    std::string image;  // relative to images/
    std::string mask;   // relative to masks/, empty: none
  };
  std::filesystem::path dir_;
  int64_t max_file_bytes_ = 0;
  std::string fingerprint_;
  std::vector<std::string> class_names_;
  std::vector<Sample> samples_;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SOURCES_SEGMENTATION_SOURCE_H_
