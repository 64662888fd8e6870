// AWS Signature Version 4 for S3 requests: the canonical request (query
// parameters sorted by their encoded names, then values), the string to
// sign, the derived key and the Authorization header. Plain functions of
// their inputs (the time is given), so the tests compare them with botocore's
// signer and AWS's published examples.
#ifndef STOKER_STORAGE_SIGV4_H_
#define STOKER_STORAGE_SIGV4_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace stoker {

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;                       // temporary credentials only
  absl::Time expiration = absl::InfiniteFuture();  // refreshed before this
  std::string source;                              // where they came from, for messages ("environment", ...)
};

struct SigV4Request {
  std::string method;                                      // GET, HEAD
  std::string host;                                        // as in the Host header: host[:port]
  std::string path;                                        // the URI path, already percent-encoded once ("/bucket/key")
  std::vector<std::pair<std::string, std::string>> query;  // decoded names and values
  std::vector<std::pair<std::string, std::string>> headers;  // signed besides host and the x-amz-* ones
  std::string payload_sha256;                                // hex; empty: the empty body's
};

// The headers to send: x-amz-date, x-amz-content-sha256, x-amz-security-token
// (with a session token) and Authorization.
std::vector<std::pair<std::string, std::string>> SignV4(const SigV4Request& request, const AwsCredentials& credentials,
                                                        absl::string_view region, absl::string_view service,
                                                        absl::Time now);

// The parts, exposed for the tests.
std::string CanonicalQuery(const std::vector<std::pair<std::string, std::string>>& query);
std::string CanonicalRequest(const SigV4Request& request,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             std::string* signed_headers);
std::string Sha256Hex(absl::string_view data);

}  // namespace stoker

#endif  // STOKER_STORAGE_SIGV4_H_
