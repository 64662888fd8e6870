// The manifest of a materialised dataset (manifest.json beside its tar
// shards): where the samples came from, which ops were applied before they
// were stored and how they are stored, the shards with their checksums, and
// the samples that could not be made. Written by stoker-materialize, read by
// the server (MaterializedSource) and by other tools (plain JSON, documented
// in docs/materialize.md). Value type; thread-compatible.
#ifndef STOKER_DATAPLANE_SOURCES_MANIFEST_H_
#define STOKER_DATAPLANE_SOURCES_MANIFEST_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/sample/stored_sample.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// Load-bearing: the file name the server looks for, and the format version
// it understands.
inline constexpr char kManifestFileName[] = "manifest.json";
// Version 2: resizes antialias unless the prefix says antialias=false; a
// version-1 manifest's resizes were made without (and are read so).
inline constexpr int kManifestVersion = 2;
inline constexpr char kManifestKind[] = "stoker-materialized-dataset";

struct Manifest {
  struct Shard {
    std::string name;  // file name in the dataset directory
    int64_t samples = 0;
    int64_t bytes = 0;
    std::string checksum;  // "xxh128:" + 32 hex digits (`xxhsum -H2`)
  };
  struct Failed {
    int64_t index = 0;  // in the source dataset
    std::string path;   // as the source describes it
    std::string reason;
  };

  std::string source_dataset;
  std::string source_fingerprint;
  int64_t source_samples = 0;
  std::vector<v1::Op> prefix;  // with defaults filled in
  StoredFormat format;
  int64_t samples = 0;  // stored: source_samples minus the failed ones
  std::vector<std::string> class_names;
  std::vector<Shard> shards;
  std::vector<Failed> failed;
  std::string created;  // RFC 3339, for people
  // Whether the shards carry the source samples' other members (fields)
  // beside the pixels, with their checksums (stored_sample.h); datasets made
  // before fields were stored do not. `fields`: the extensions found, sorted.
  bool stores_fields = false;
  std::vector<std::string> fields;

  std::string ToJson() const;
};

// DATA_LOSS naming the field that is missing or wrong (the file's path is the
// caller's to add); FAILED_PRECONDITION for a newer format version.
absl::StatusOr<Manifest> ParseManifest(const std::string& json);

// Reads and parses dir/manifest.json; errors name the file.
absl::StatusOr<Manifest> ReadManifest(const std::filesystem::path& dir);

// The xxh128 checksum of a file, as in Manifest::Shard::checksum.
absl::StatusOr<std::string> FileChecksum(const std::filesystem::path& path);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SOURCES_MANIFEST_H_
