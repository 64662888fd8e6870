// Where a dataset's samples come from: an ImageFolder tree, WebDataset-style
// tar shards, or a synthetic source. A source is immutable once opened and
// shared by every session reading the dataset; all methods are thread-safe.
#ifndef STOKER_DATAPLANE_SAMPLE_SAMPLE_SOURCE_H_
#define STOKER_DATAPLANE_SAMPLE_SAMPLE_SOURCE_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dataplane/base/file_stamp.h"
#include "dataplane/sample/geometry.h"
#include "dataplane/sample/stored_sample.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

enum class MediaKind { kImage, kAudio, kVideo };

// A materialised dataset's samples: the ops applied before they were stored
// (a session's pipeline must begin with them) and how they are stored.
// Which targets a session wants from ReadTargets (decoding masks costs).
struct TargetNeeds {
  bool boxes = false;  // boxes, labels and crowd flags
  bool masks = false;  // instance masks
  bool keypoints = false;
  bool mask = false;       // the per-pixel mask of a segmentation source
  int64_t max_pixels = 0;  // largest mask decoded (width x height; 0: no limit)
};

struct StoredForm {
  std::vector<v1::Op> prefix;
  StoredFormat format;
};

inline constexpr int64_t kShardBlockSamples = 256;

class SampleSource {
 public:
  virtual ~SampleSource() = default;

  virtual int64_t size() const = 0;
  // How the samples lie in the files a store serves whole, for the
  // shard-aware order: samples per shard in index order. Default: blocks of
  // kShardBlockSamples consecutive indices (a folder's files are read one by
  // one; a block keeps one server's reads of them together).
  virtual std::vector<int64_t> ShardSizes() const;
  // Label i is class_names()[i].
  virtual const std::vector<std::string>& class_names() const = 0;
  virtual int32_t label(int64_t index) const = 0;
  // Where the sample lives, for logs and FailedSample.path: a path relative
  // to the dataset, or "shard.tar:member".
  virtual std::string Describe(int64_t index) const = 0;
  // The sample's encoded bytes. Errors name the file.
  virtual absl::StatusOr<std::string> Read(int64_t index) const = 0;
  // Identifies the content as indexed ("xxh3:" + 16 hex digits); see
  // OpenSessionResponse.dataset_fingerprint.
  virtual const std::string& fingerprint() const = 0;
  // Null for sources of encoded images (Read gives a file's bytes); for a
  // materialised dataset, what Read's bytes are.
  virtual const StoredForm* stored() const { return nullptr; }
  // What the samples' files are: images, or audio or video files (a
  // class-per-folder tree of them), read by audio(...) or video_clip(...)
  // pipelines only.
  virtual MediaKind media() const { return MediaKind::kImage; }
  // Where sample `index`'s video index may be kept across restarts
  // (video_index_cache.h): a sidecar valid while `file` (the sample's own
  // file, or its tar shard) has `stamp` (its content as the source read it)
  // and for a sample of `bytes` bytes. Nullopt: memory only (samples made on
  // the fly, stored forms, a file that cannot be stat'ed).
  struct MediaIndexHome {
    std::filesystem::path sidecar;
    std::filesystem::path file;
    FileStamp stamp;
    int64_t bytes = -1;
  };
  virtual std::optional<MediaIndexHome> MediaIndexHomeOf(int64_t index) const { return std::nullopt; }
  // A hint that these samples are read soon (a batch was asked for): a
  // source whose bytes are fetched on demand starts fetching them. Never
  // blocks; the default does nothing.
  virtual void WillRead(const int64_t* indices, int64_t n) const {}

  // Whether samples have named members besides the image (WebDataset
  // shards), which ReadField finds.
  virtual bool has_members() const { return false; }
  // The bytes of the sample's member with the first of `extensions` it has;
  // *which gets that extension. A sample with none of them: INVALID_ARGUMENT
  // with DecodeFailure kMissingField (image_decoder.h) naming what it has.
  // A member over `max_bytes` (0: only the source's own limit) is too_large
  // before it is read.
  virtual absl::StatusOr<std::string> ReadField(int64_t index, const std::vector<std::string>& extensions,
                                                std::string* which, int64_t max_bytes = 0) const;
  // The extensions of the sample's members other than its image and its
  // label (.cls), in the sample's order: what a materialised copy stores
  // beside the pixels. Empty for sources without members.
  virtual std::vector<std::string> FieldMembers(int64_t index) const { return {}; }
  // Samples without a class label (label() gives 0 for them).
  virtual int64_t unlabeled_samples() const { return 0; }
  // OK unless the sample has a class label that cannot be read (a .cls
  // member that is not an integer): then bad_field (image_decoder.h) naming
  // the member and what it holds, so that batches carrying labels treat the
  // sample as bad under the session's policy instead of labelling it 0.
  virtual absl::Status LabelStatus(int64_t index) const { return absl::OkStatus(); }

  // Annotated sources (COCO): each sample's targets in its image's pixel
  // coordinates (geometry.h). Errors are decode failures naming the sample
  // and the annotation (kBadField for one that cannot be made).
  virtual bool has_annotations() const { return false; }
  // Segmentation sources: ReadTargets gives the per-pixel mask.
  virtual bool has_masks() const { return false; }
  virtual int keypoints_per_box() const { return 0; }
  virtual absl::Status ReadTargets(int64_t index, const TargetNeeds& needs, SampleTargets* targets) const;
};

// Builds a fingerprint from the parts of an index, in order. Thread-compatible.
class FingerprintBuilder {
 public:
  FingerprintBuilder();
  ~FingerprintBuilder();
  FingerprintBuilder& Add(absl::string_view part);
  FingerprintBuilder& Add(int64_t value);
  std::string Finish();

 private:
  void* state_;  // XXH3_state_t
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SAMPLE_SAMPLE_SOURCE_H_
