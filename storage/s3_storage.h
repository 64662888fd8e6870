// S3-compatible object stores as a Storage: s3://bucket/prefix with keys
// below the prefix. Stat is a HEAD, List is ListObjectsV2 (every page),
// reads are ranged GETs pinned with If-Match to the ETag first seen. Signed
// with SigV4 from the AWS credential chain (or anonymous); path-style or
// virtual-hosted addressing; any endpoint (MinIO, Ceph, R2, GCS's
// interoperability API). Thread-safe.
#ifndef STOKER_STORAGE_S3_STORAGE_H_
#define STOKER_STORAGE_S3_STORAGE_H_

#include <memory>
#include <string>
#include <vector>

#include "storage/storage.h"
#include "storage/url.h"

namespace stoker {

absl::StatusOr<std::unique_ptr<Storage>> OpenS3Storage(const Url& root, const StorageOptions& options);

// One ListObjectsV2 page: its objects (full keys), whether more follow and
// the token for the next page. INVALID_ARGUMENT when the XML is not one.
struct ListPage {
  std::vector<ObjectInfo> objects;
  bool truncated = false;
  std::string next_token;
};
absl::StatusOr<ListPage> ParseListObjectsV2(const std::string& xml);

}  // namespace stoker

#endif  // STOKER_STORAGE_S3_STORAGE_H_
