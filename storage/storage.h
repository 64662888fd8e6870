// Storage: where a dataset's bytes live, as one small interface (stat, list
// a prefix, read a byte range of a pinned object) over the local filesystem,
// HTTP(S) and S3-compatible object stores (as leveldb's Env or Arrow's
// FileSystem). Keys are '/'-separated paths below the storage's root.
// Implementations are thread-safe: many reads may be in flight at once.
#ifndef STOKER_STORAGE_STORAGE_H_
#define STOKER_STORAGE_STORAGE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace stoker {

// One object as a read first saw it. Reads name it to read that version: a
// later read of an object that changed since fails (FAILED_PRECONDITION,
// naming it) instead of mixing old and new bytes.
struct ObjectInfo {
  std::string key;       // below the root, '/'-separated
  int64_t size = 0;      // bytes
  std::string etag;      // the store's version tag (HTTP ETag); empty where there is none
  int64_t mtime_ns = 0;  // last modification (local files; stores: Last-Modified where given)
};

// The upper bounds (seconds) of the request latency buckets.
inline constexpr double kStorageLatencyBounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                   0.25,  0.5,    1,     2.5,  5,     10,   30};

// What one storage's reads did, for metrics and logs.
struct StorageCounters {
  int64_t requests = 0;                              // requests sent (retries included)
  int64_t bytes = 0;                                 // body bytes received
  int64_t retries = 0;                               // attempts beyond the first
  std::map<std::string, int64_t> retries_by_reason;  // "503", "429", "reset", "timeout", "short_body", ...
  // Each request's time to its answer: counts per bucket of
  // kStorageLatencyBounds (not cumulative; one more past the last bound),
  // and their sum in seconds. Empty where no request was sent.
  std::vector<int64_t> latency_counts;
  double latency_seconds = 0;
};

class Storage {
 public:
  virtual ~Storage() = default;

  // The root as given (a path or a URL), for messages; never holds a secret.
  virtual std::string root() const = 0;
  // `key` as a full path or URL, for messages.
  virtual std::string Describe(absl::string_view key) const = 0;
  // NOT_FOUND when there is no such object.
  virtual absl::StatusOr<ObjectInfo> Stat(absl::string_view key) = 0;
  // Every object whose key starts with `prefix` (all levels), sorted by key.
  // UNIMPLEMENTED where the store cannot list (plain HTTP).
  virtual absl::StatusOr<std::vector<ObjectInfo>> List(absl::string_view prefix) = 0;
  // Bytes [offset, offset + length) of `object` as Stat saw it, appended to
  // *out; a range past the end is an error (OUT_OF_RANGE). FAILED_PRECONDITION
  // when the object changed since (another size, mtime or ETag).
  virtual absl::Status ReadRange(const ObjectInfo& object, int64_t offset, int64_t length, std::string* out) = 0;
  // A version of List(prefix)'s answer, from one request: a listing cached
  // with the same version still stands. "" where the store has none (an S3
  // listing is not versioned; a cache must list again).
  virtual absl::StatusOr<std::string> ListingVersion(absl::string_view prefix) { return std::string(); }
  // List(prefix) and the version the listing had (as ListingVersion, taken
  // first), in as few requests as the store allows.
  virtual absl::StatusOr<std::vector<ObjectInfo>> ListVersioned(absl::string_view prefix, std::string* version) {
    absl::StatusOr<std::string> v = ListingVersion(prefix);
    if (!v.ok()) return v.status();
    *version = *std::move(v);
    return List(prefix);
  }
  // Whether keys name local files (then callers may open them directly).
  virtual bool is_local() const { return false; }
  virtual StorageCounters counters() const { return {}; }
};

// Stat of each key, `parallel` at a time, in the keys' order; the first
// error (naming the key) fails it.
absl::StatusOr<std::vector<ObjectInfo>> StatAll(Storage& storage, const std::vector<std::string>& keys, int parallel);

// OUT_OF_RANGE naming the object unless [offset, offset + length) lies in it
// (what every ReadRange checks first).
absl::Status CheckRange(const Storage& storage, const ObjectInfo& object, int64_t offset, int64_t length);

// Transport settings shared by the remote stores.
struct StorageOptions {
  // S3: the endpoint (e.g. http://127.0.0.1:9000 for MinIO); empty: from
  // AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, else AWS's regional endpoint.
  std::string s3_endpoint;
  // S3: the region signed for; empty: AWS_REGION / AWS_DEFAULT_REGION, else us-east-1.
  std::string s3_region;
  // S3 addressing: path-style (endpoint/bucket/key) or virtual-hosted
  // (bucket.endpoint/key); default: path-style with a given endpoint.
  enum class Addressing { kAuto, kPath, kVirtual };
  Addressing s3_addressing = Addressing::kAuto;
  // S3: send unsigned requests (public buckets).
  bool s3_anonymous = false;
  // HTTP(S): a file whose first line is a bearer token sent with each request.
  std::string http_bearer_token_file;
  // TLS: a PEM bundle of CAs instead of the system's.
  std::string ca_file;
  // Per request: the whole request's deadline, and connecting's.
  absl::Duration request_timeout = absl::Seconds(60);
  absl::Duration connect_timeout = absl::Seconds(10);
  // Objects stat'ed at once where a listing needs it (HTTP's index.txt).
  int list_parallel = 16;
  // Retries of failed requests (5xx, 429, resets, timeouts, short bodies),
  // with exponential backoff and full jitter between these bounds.
  int max_attempts = 8;
  absl::Duration backoff_base = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(10);
};

// The storage for `root`: a local directory (a path or file:///path),
// http(s)://host[:port]/path, or s3://bucket[/prefix]. INVALID_ARGUMENT
// names what does not parse; a local root must be a directory.
absl::StatusOr<std::unique_ptr<Storage>> OpenStorage(absl::string_view root, const StorageOptions& options = {});

// Whether `root` names a remote store (a URL other than file://).
bool IsRemoteRoot(absl::string_view root);

// Reads an object front to back in blocks of `block_bytes` (one ranged read
// each: large reads, never one per small member). Thread-compatible.
class SequentialReader {
 public:
  SequentialReader(Storage* storage, ObjectInfo object, int64_t block_bytes = int64_t{8} << 20);
  // Up to `n` bytes appended to *out; 0 appended at the end.
  absl::Status Read(int64_t n, std::string* out);
  int64_t position() const { return position_; }

 private:
  Storage* const storage_;
  const ObjectInfo object_;
  const int64_t block_bytes_;
  std::string block_;
  int64_t block_start_ = 0;
  int64_t position_ = 0;
};

}  // namespace stoker

#endif  // STOKER_STORAGE_STORAGE_H_
