#include "storage/storage_flags.h"

#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "storage/remote_root.h"

ABSL_FLAG(std::string, s3_endpoint, "",
          "S3 endpoint URL for s3:// data (MinIO, Ceph, R2, GCS with HMAC keys); empty: AWS_ENDPOINT_URL_S3 / "
          "AWS_ENDPOINT_URL, else AWS");
ABSL_FLAG(std::string, s3_region, "", "S3 region to sign for; empty: AWS_REGION / AWS_DEFAULT_REGION, else us-east-1");
ABSL_FLAG(std::string, s3_addressing, "auto",
          "S3 addressing: auto (virtual-hosted on AWS, path-style with an endpoint), path or virtual");
ABSL_FLAG(bool, s3_anonymous, false, "Send unsigned S3 requests (public buckets); else the AWS credential chain");
ABSL_FLAG(std::string, storage_token_file, "",
          "File whose first line is a bearer token for http(s):// data; empty: STOKER_STORAGE_TOKEN_FILE, else none");
ABSL_FLAG(std::string, storage_ca_file, "",
          "PEM bundle of CAs for https:// data and endpoints; empty: STOKER_STORAGE_CA_FILE, else the system's");
ABSL_FLAG(double, storage_request_timeout, 60, "Deadline of one storage request attempt, seconds");
ABSL_FLAG(int, storage_max_attempts, 8,
          "Attempts per storage request (retries on 5xx, 429, resets, timeouts, with exponential backoff and jitter)");
ABSL_FLAG(std::string, cache_dir, "",
          "Where a remote --data-root's datasets are copied (whole objects, checked, kept across restarts); empty: "
          "STOKER_CACHE_DIR, else $TMPDIR/stoker-cache-<uid>");
ABSL_FLAG(int64_t, cache_bytes, 0,
          "Most bytes of a remote --data-root kept in --cache-dir (earlier runs' datasets are evicted first); 0: "
          "STOKER_CACHE_BYTES, else 256 GiB");
ABSL_FLAG(bool, stream_shards, false,
          "Leave a remote dataset's tar shards in the store and fetch each when a read needs it (kept in --cache-dir "
          "while read, least recently used out), instead of copying the dataset whole first; a dataset larger than "
          "--cache-bytes is streamed anyway. Pair it with the shard-aware epoch order (shuffle=shards). Also "
          "STOKER_STREAM_SHARDS=1");
ABSL_FLAG(int, fetch_parallel, 16,
          "Ranged reads in flight when copying a remote --data-root's dataset (over all its objects: a large one is "
          "read by several at once)");

namespace stoker {

absl::StatusOr<StorageOptions> StorageOptionsFromFlags() {
  StorageOptions o = StorageOptionsFromEnv();
  o.s3_endpoint = absl::GetFlag(FLAGS_s3_endpoint);
  o.s3_region = absl::GetFlag(FLAGS_s3_region);
  const std::string addressing = absl::GetFlag(FLAGS_s3_addressing);
  if (addressing == "path") {
    o.s3_addressing = StorageOptions::Addressing::kPath;
  } else if (addressing == "virtual") {
    o.s3_addressing = StorageOptions::Addressing::kVirtual;
  } else if (addressing != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("--s3-addressing=", addressing, "; expected auto, path or virtual"));
  }
  o.s3_anonymous = absl::GetFlag(FLAGS_s3_anonymous);
  if (!absl::GetFlag(FLAGS_storage_token_file).empty())
    o.http_bearer_token_file = absl::GetFlag(FLAGS_storage_token_file);
  if (!absl::GetFlag(FLAGS_storage_ca_file).empty()) o.ca_file = absl::GetFlag(FLAGS_storage_ca_file);
  const double timeout = absl::GetFlag(FLAGS_storage_request_timeout);
  if (!(timeout > 0) || absl::GetFlag(FLAGS_storage_max_attempts) < 1) {
    return absl::InvalidArgumentError("--storage-request-timeout must be > 0 and --storage-max-attempts >= 1");
  }
  o.request_timeout = absl::Seconds(timeout);
  o.max_attempts = absl::GetFlag(FLAGS_storage_max_attempts);
  return o;
}

BlockFetchOptions FetchOptionsFromFlags() {
  BlockFetchOptions o;
  o.block_bytes = MirrorOptions().block_bytes;
  o.parallel = std::max(1, absl::GetFlag(FLAGS_fetch_parallel));
  return o;
}

absl::StatusOr<std::unique_ptr<StoreMirror>> MirrorFromFlags(const std::string& data_root) {
  absl::StatusOr<StorageOptions> o = StorageOptionsFromFlags();
  if (!o.ok()) return o.status();
  absl::StatusOr<MirrorOptions> m = MirrorOptionsFromEnv();
  if (!m.ok()) return m.status();
  if (!absl::GetFlag(FLAGS_cache_dir).empty()) m->cache_dir = absl::GetFlag(FLAGS_cache_dir);
  if (absl::GetFlag(FLAGS_cache_bytes) != 0) m->cache_bytes = absl::GetFlag(FLAGS_cache_bytes);
  m->parallel = absl::GetFlag(FLAGS_fetch_parallel);
  if (absl::GetFlag(FLAGS_stream_shards)) m->stream_shards = true;
  if (m->cache_bytes <= 0 || m->parallel < 1) {
    return absl::InvalidArgumentError("--cache-bytes must be > 0 and --fetch-parallel >= 1");
  }
  return OpenMirror(data_root, *o, *std::move(m));
}

}  // namespace stoker
