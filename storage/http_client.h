// HttpClient: GET and HEAD over libcurl with the retries object stores need:
// exponential backoff with full jitter on 5xx, 429, resets, timeouts and
// short bodies; a ranged read that was cut resumes from the byte reached; a
// deadline per attempt; a clock offset learned from a RequestTimeTooSkewed
// answer. 4xx answers fail at once with the URL and the status (404:
// NOT_FOUND, 401/403: PERMISSION_DENIED, 412: FAILED_PRECONDITION, 416:
// OUT_OF_RANGE). Connections are reused (a pool of curl handles).
// Thread-safe. Never logs or returns a header's value.
#ifndef STOKER_STORAGE_HTTP_CLIENT_H_
#define STOKER_STORAGE_HTTP_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/storage.h"

namespace stoker {

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT (with no body) or POST (of `body`)
  std::string body;            // POST: a form (application/x-www-form-urlencoded)
  std::string url;             // scheme://host[:port]/path[?query], already encoded
  std::vector<std::pair<std::string, std::string>> headers;
  // A ranged GET of [range_start, range_start + range_length) when >= 0.
  int64_t range_start = -1;
  int64_t range_length = 0;
  // The URL as messages show it, when `url` holds a secret (a query token).
  std::string display_url;
  // For signers: the parts `url` was built from (Host header, encoded path,
  // decoded query parameters).
  std::string host;
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// The delay before retry `attempt` (1 = the first retry): full jitter,
// u * min(max, base * 2^(attempt - 1)) for u in [0, 1).
absl::Duration BackoffDelay(int attempt, absl::Duration base, absl::Duration max, double u);

class HttpClient {
 public:
  // Adds what a request needs before each attempt (signing, a token), at
  // `now` (the local clock plus any learned offset).
  using Prepare = std::function<absl::Status(HttpRequest*, absl::Time now)>;

  HttpClient(const StorageOptions& options, Prepare prepare);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` until it succeeds or fails for good. A ranged GET
  // returns exactly its bytes (a 200 with the whole object is cut to them).
  absl::StatusOr<HttpResponse> Fetch(const HttpRequest& request);

  StorageCounters counters() const;

 private:
  struct Attempt;
  void* TakeHandle();
  void GiveHandle(void* handle);
  void Perform(const HttpRequest& request, int64_t resume_from, Attempt* attempt);
  void CountRetry(const std::string& reason);
  void CountLatency(absl::Duration took);

  const StorageOptions options_;
  const Prepare prepare_;
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> bytes_{0};
  std::atomic<int64_t> clock_offset_us_{0};

  mutable absl::Mutex mu_;
  std::vector<void*> handles_ ABSL_GUARDED_BY(mu_);  // idle CURL* easy handles
  std::map<std::string, int64_t> retries_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> latency_counts_ ABSL_GUARDED_BY(mu_);  // StorageCounters::latency_counts
  double latency_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

// An HTTP date (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT"); false when it
// does not parse.
bool ParseHttpDate(const std::string& text, absl::Time* out);

// The object `key` as a HEAD answer describes it (Content-Length, ETag,
// Last-Modified); UNAVAILABLE naming `what` without a valid Content-Length.
absl::StatusOr<ObjectInfo> ObjectFromHead(absl::string_view key, const HttpResponse& head, absl::string_view what);

// The store's error code from an S3-style XML error body (<Code>...</Code>),
// or "".
std::string XmlErrorCode(const std::string& body);

}  // namespace stoker

#endif  // STOKER_STORAGE_HTTP_CLIENT_H_
