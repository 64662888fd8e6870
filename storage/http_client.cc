#include "storage/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace stoker {
namespace {

constexpr int64_t kMaxErrorBody = 64 << 10;

std::once_flag g_curl_init;

// One attempt's answer, filled by libcurl's callbacks.
struct AttemptState {
  const HttpRequest* request = nullptr;
  int64_t resume_from = 0;  // bytes of the range already held
  long status = 0;          // from the last status line
  std::map<std::string, std::string> headers;
  std::string body;
  int64_t skip = 0;  // body bytes still to drop (a 200 answer to a ranged GET)
  bool skip_set = false;
  bool capped = false;  // stopped on purpose after the bytes wanted
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<AttemptState*>(user);
  absl::string_view line(data, size * n);
  if (absl::StartsWith(line, "HTTP/")) {  // a new answer (after 100 Continue or a redirect)
    a->headers.clear();
    const size_t space = line.find(' ');
    long status = 0;
    if (space != absl::string_view::npos && absl::SimpleAtoi(line.substr(space + 1, 3), &status)) a->status = status;
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    a->headers[absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, colon)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* a = static_cast<AttemptState*>(user);
  absl::string_view chunk(data, size * n);
  const HttpRequest& r = *a->request;
  const bool ranged = r.range_start >= 0;
  int64_t cap = kMaxErrorBody;
  if (a->status / 100 == 2 && ranged) {
    if (a->status == 200 && !a->skip_set) {  // the whole object came: drop what precedes the range
      a->skip = r.range_start + a->resume_from;
      a->skip_set = true;
    }
    cap = r.range_length - a->resume_from;
  } else if (a->status / 100 == 2) {
    cap = -1;
  }
  if (a->skip > 0) {
    const int64_t drop = std::min<int64_t>(a->skip, static_cast<int64_t>(chunk.size()));
    a->skip -= drop;
    chunk.remove_prefix(static_cast<size_t>(drop));
  }
  if (cap > 0 && a->body.capacity() < static_cast<size_t>(cap) && a->status / 100 == 2) {
    a->body.reserve(static_cast<size_t>(cap));  // a ranged read's bytes, without regrowing
  }
  if (cap >= 0 && static_cast<int64_t>(a->body.size() + chunk.size()) > cap) {
    a->body.append(chunk.data(), static_cast<size_t>(cap - static_cast<int64_t>(a->body.size())));
    a->capped = true;
    return 0;  // enough: libcurl stops with CURLE_WRITE_ERROR
  }
  a->body.append(chunk.data(), chunk.size());
  return size * n;
}

// Whether the request carries an AWS signature's date (S3, STS).
bool Signed(const HttpRequest& r) {
  return std::any_of(r.headers.begin(), r.headers.end(),
                     [](const auto& h) { return absl::EqualsIgnoreCase(h.first, "x-amz-date"); });
}

std::string What(const HttpRequest& r) {
  return absl::StrCat(r.method, " ", r.display_url.empty() ? r.url : r.display_url);
}

// Why a transfer failed, as a retry reason; "" when it must not be retried.
std::string TransportReason(CURLcode code) {
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT: return "timeout";
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST: return "connect";
    case CURLE_PARTIAL_FILE: return "short_body";
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SSL_CONNECT_ERROR: return "reset";
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL: return "";
    default: return "transport";
  }
}

absl::Status StatusFor(const HttpRequest& r, long status, const std::string& body) {
  const std::string code = XmlErrorCode(body);
  const std::string message = absl::StrCat(What(r), ": HTTP ", status, code.empty() ? "" : " ", code);
  switch (status) {
    case 404: return absl::NotFoundError(message);
    case 401:
    case 403: return absl::PermissionDeniedError(message);
    case 412:
      return absl::FailedPreconditionError(absl::StrCat(message, " (the object changed since it was first read)"));
    case 416: return absl::OutOfRangeError(message);
    default: return status >= 400 && status < 500 ? absl::InvalidArgumentError(message) : absl::UnknownError(message);
  }
}

bool Retryable(long status) { return status == 429 || status >= 500; }

}  // namespace

absl::Duration BackoffDelay(int attempt, absl::Duration base, absl::Duration max, double u) {
  absl::Duration cap = base;
  for (int i = 1; i < attempt && cap < max; ++i) cap *= 2;
  return std::min(cap, max) * std::clamp(u, 0.0, 1.0);
}

bool ParseHttpDate(const std::string& text, absl::Time* out) {
  std::string err;
  return absl::ParseTime("%a, %d %b %Y %H:%M:%S", absl::StripSuffix(text, " GMT"), absl::UTCTimeZone(), out, &err);
}

absl::StatusOr<ObjectInfo> ObjectFromHead(absl::string_view key, const HttpResponse& head, absl::string_view what) {
  ObjectInfo info;
  info.key = std::string(key);
  auto length = head.headers.find("content-length");
  if (length == head.headers.end() || !absl::SimpleAtoi(length->second, &info.size) || info.size < 0) {
    return absl::UnavailableError(absl::StrCat("HEAD ", what, ": no Content-Length in the answer"));
  }
  if (auto it = head.headers.find("etag"); it != head.headers.end()) info.etag = it->second;
  absl::Time modified;
  if (auto it = head.headers.find("last-modified"); it != head.headers.end() && ParseHttpDate(it->second, &modified)) {
    info.mtime_ns = absl::ToUnixNanos(modified);
  }
  return info;
}

std::string XmlErrorCode(const std::string& body) {
  const size_t start = body.find("<Code>");
  const size_t end = body.find("</Code>");
  if (start == std::string::npos || end == std::string::npos || end < start) return "";
  std::string code = body.substr(start + 6, end - start - 6);
  if (code.size() > 64) code.resize(64);
  return code;
}

HttpClient::HttpClient(const StorageOptions& options, Prepare prepare)
    : options_(options), prepare_(std::move(prepare)), rng_(std::random_device{}()) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpClient::~HttpClient() {
  absl::MutexLock lock(&mu_);
  for (void* h : handles_) curl_easy_cleanup(static_cast<CURL*>(h));
}

void* HttpClient::TakeHandle() {
  {
    absl::MutexLock lock(&mu_);
    if (!handles_.empty()) {
      void* h = handles_.back();
      handles_.pop_back();
      return h;
    }
  }
  return curl_easy_init();
}

void HttpClient::GiveHandle(void* handle) {
  absl::MutexLock lock(&mu_);
  handles_.push_back(handle);
}

void HttpClient::CountRetry(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  ++retries_[reason];
}

void HttpClient::CountLatency(absl::Duration took) {
  const double seconds = absl::ToDoubleSeconds(took);
  const size_t bucket = std::lower_bound(std::begin(kStorageLatencyBounds), std::end(kStorageLatencyBounds), seconds) -
                        std::begin(kStorageLatencyBounds);
  absl::MutexLock lock(&mu_);
  if (latency_counts_.empty()) latency_counts_.assign(std::size(kStorageLatencyBounds) + 1, 0);
  ++latency_counts_[bucket];
  latency_seconds_ += seconds;
}

StorageCounters HttpClient::counters() const {
  StorageCounters c;
  c.requests = requests_.load();
  c.bytes = bytes_.load();
  absl::MutexLock lock(&mu_);
  c.retries_by_reason = retries_;
  c.latency_counts = latency_counts_;
  c.latency_seconds = latency_seconds_;
  for (const auto& [reason, n] : retries_) c.retries += n;
  return c;
}

struct HttpClient::Attempt {
  AttemptState state;
  CURLcode code = CURLE_OK;
  char error[CURL_ERROR_SIZE] = {0};
};

void HttpClient::Perform(const HttpRequest& r, int64_t resume_from, Attempt* a) {
  CURL* curl = static_cast<CURL*>(TakeHandle());
  curl_easy_reset(curl);
  a->state.request = &r;
  a->state.resume_from = resume_from;
  curl_slist* headers = nullptr;
  for (const auto& [name, value] : r.headers)
    headers = curl_slist_append(headers, absl::StrCat(name, ": ", value).c_str());
  if (r.range_start >= 0) {
    const int64_t first = r.range_start + resume_from;
    headers = curl_slist_append(headers,
                                absl::StrCat("Range: bytes=", first, "-", r.range_start + r.range_length - 1).c_str());
  }
  curl_easy_setopt(curl, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (r.method == "HEAD") curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  if (r.method == "POST") {  // a form (STS)
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, r.body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(r.body.size()));
  }
  if (r.method == "PUT") {  // an empty PUT (the instance-metadata token)
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, 0L);
  }
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);  // fewer, larger body callbacks (libcurl's most)
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(options_.request_timeout)));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options_.connect_timeout)));
  // A stall (no byte for 15 s) ends the attempt before its deadline.
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 15L);
  if (!options_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options_.ca_file.c_str());
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &a->state);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &a->state);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, a->error);
  a->code = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  GiveHandle(curl);
}

absl::StatusOr<HttpResponse> HttpClient::Fetch(const HttpRequest& request) {
  const bool ranged = request.range_start >= 0;
  HttpResponse out;
  std::string etag;  // the first answer's, which every resumed part must share
  std::string problem;
  for (int attempt = 1;; ++attempt) {
    if (attempt > 1) {
      double u;
      {
        absl::MutexLock lock(&mu_);
        u = std::uniform_real_distribution<double>(0, 1)(rng_);
      }
      absl::SleepFor(BackoffDelay(attempt - 1, options_.backoff_base, options_.backoff_max, u));
    }
    HttpRequest r = request;
    const absl::Time now = absl::Now() + absl::Microseconds(clock_offset_us_.load());
    if (prepare_) {
      if (absl::Status s = prepare_(&r, now); !s.ok()) return s;
    }
    Attempt a;
    const int64_t held = ranged ? static_cast<int64_t>(out.body.size()) : 0;
    const absl::Time sent = absl::Now();
    Perform(r, held, &a);
    CountLatency(absl::Now() - sent);
    ++requests_;
    bytes_ += static_cast<int64_t>(a.state.body.size());
    const long status = a.state.status;
    const bool success = status / 100 == 2;
    if (success && ranged) {
      auto it = a.state.headers.find("etag");
      const std::string got_etag = it == a.state.headers.end() ? "" : it->second;
      if (held > 0 && got_etag != etag) {
        return absl::FailedPreconditionError(absl::StrCat(What(r), ": the object changed between parts of one read"));
      }
      if (held == 0) {
        etag = got_etag;
        out.body = std::move(a.state.body);
      } else {
        out.body += a.state.body;
      }
    }
    std::string reason;
    if (a.code != CURLE_OK && !(a.state.capped && a.code == CURLE_WRITE_ERROR)) {
      reason = TransportReason(a.code);
      problem = absl::StrCat(curl_easy_strerror(a.code), a.error[0] ? absl::StrCat(" (", a.error, ")") : "");
      if (reason.empty()) return absl::UnavailableError(absl::StrCat(What(r), ": ", problem));
    } else if (success) {
      if (ranged && static_cast<int64_t>(out.body.size()) < request.range_length) {
        reason = "short_body";
        problem = absl::StrCat("a short body (", out.body.size(), " of ", request.range_length, " bytes)");
      } else {
        out.status = status;
        out.headers = std::move(a.state.headers);
        if (!ranged) out.body = std::move(a.state.body);
        return out;
      }
    } else if (absl::Time server;
               status == 403 && a.state.headers.count("date") && ParseHttpDate(a.state.headers["date"], &server) &&
               (XmlErrorCode(a.state.body) == "RequestTimeTooSkewed" ||
                // A signed HEAD's answer has no body to say so: a 403 from a
                // clock further off than S3 accepts (15 minutes).
                (r.method == "HEAD" && Signed(r) && absl::AbsDuration(server - now) > absl::Minutes(15)))) {
      clock_offset_us_ = absl::ToInt64Microseconds(server - absl::Now());
      reason = "clock_skew";
      problem = "the store says the request's time is skewed";
    } else if (Retryable(status)) {
      reason = absl::StrCat(status);
      problem = absl::StrCat("HTTP ", status, " ", XmlErrorCode(a.state.body));
    } else {
      return StatusFor(r, status, a.state.body);
    }
    if (attempt >= options_.max_attempts) {
      return absl::UnavailableError(absl::StrCat(What(r), ": ", problem, " after ", attempt, " attempts"));
    }
    CountRetry(reason);
  }
}

}  // namespace stoker
