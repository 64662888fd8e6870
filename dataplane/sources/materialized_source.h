// A materialised dataset (stoker-materialize's output) as a sample source:
// the shards its manifest lists, checked against the manifest when opened,
// whose samples are the stored prefix's output (StoredForm). Immutable after
// Open; thread-safe.
#ifndef STOKER_DATAPLANE_SOURCES_MATERIALIZED_SOURCE_H_
#define STOKER_DATAPLANE_SOURCES_MATERIALIZED_SOURCE_H_

#include <atomic>
#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"
#include "dataplane/sample/sample_source.h"
#include "dataplane/sources/manifest.h"
#include "dataplane/sources/tar_shards.h"

namespace stoker {

// True when `dir` holds a manifest.json that is a materialised dataset's
// (or does not parse: then Open reports it).
bool HasManifest(const std::filesystem::path& dir);

class MaterializedSource final : public SampleSource {
 public:
  // Reads dir/manifest.json and opens the shards it lists. DATA_LOSS names
  // what does not match: a missing shard, a shard whose size or sample count
  // differs from the manifest's, a damaged shard, a label past the class
  // names. Member reads larger than `max_file_bytes` (0: none) are too_large.
  // `streamed` (when given): shards that stay in a remote store.
  static absl::StatusOr<std::shared_ptr<const MaterializedSource>> Open(const std::filesystem::path& dir,
                                                                        int64_t max_file_bytes = 0,
                                                                        const std::atomic<bool>* cancelled = nullptr,
                                                                        const StreamedShards* streamed = nullptr);

  int64_t size() const override { return shards_->size(); }
  const std::vector<std::string>& class_names() const override { return manifest_.class_names; }
  int32_t label(int64_t index) const override { return shards_->label(index); }
  std::string Describe(int64_t index) const override { return shards_->Describe(index); }
  void WillRead(const int64_t* indices, int64_t n) const override { shards_->WillRead(indices, n); }
  std::vector<int64_t> ShardSizes() const override { return shards_->ShardSizes(); }
  // The stored bytes; when the dataset has per-sample checksums (KEY.xxh3,
  // stored_sample.h), checked against them: a mismatch or a missing checksum
  // is a corrupt sample naming the member.
  absl::StatusOr<std::string> Read(int64_t index) const override;
  const std::string& fingerprint() const override { return fingerprint_; }
  const StoredForm* stored() const override { return &stored_; }
  // Datasets made since fields are stored carry each source sample's other
  // members beside the pixels; ReadField checks each against its checksum
  // (KEY.fields.xxh3): a mismatch or a member without one is corrupt.
  bool has_members() const override { return manifest_.stores_fields; }
  absl::StatusOr<std::string> ReadField(int64_t index, const std::vector<std::string>& extensions, std::string* which,
                                        int64_t max_bytes = 0) const override;

  const Manifest& manifest() const { return manifest_; }
  // Whether the shards carry per-sample checksums (made since they exist).
  bool checksummed() const { return checksummed_; }

 private:
  MaterializedSource() = default;

  Manifest manifest_;
  StoredForm stored_;
  std::shared_ptr<const TarShardSource> shards_;
  std::string fingerprint_;
  bool checksummed_ = false;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SOURCES_MATERIALIZED_SOURCE_H_
