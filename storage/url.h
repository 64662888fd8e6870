// URLs of stores: scheme://host[:port]/path, split and checked, and the
// percent-encoding that HTTP paths and S3 signing need. Plain functions.
#ifndef STOKER_STORAGE_URL_H_
#define STOKER_STORAGE_URL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

struct Url {
  std::string scheme;  // lower case: http, https, s3, file
  std::string host;    // s3: the bucket
  int port = 0;        // 0: the scheme's default
  std::string path;    // "" or starting with '/', not decoded
  // scheme://host[:port] (no path).
  std::string Origin() const;
};

// INVALID_ARGUMENT naming the problem: no scheme, an unknown one, no host,
// a bad port, user:password@ (credentials never go in URLs), a query or
// fragment.
absl::StatusOr<Url> ParseUrl(absl::string_view text);

// RFC 3986 percent-encoding of everything but unreserved characters
// (A-Z a-z 0-9 - . _ ~), and '/' too unless `keep_slash` (AWS's UriEncode).
std::string UriEncode(absl::string_view text, bool keep_slash);

// %XX sequences decoded (a malformed one is kept as it is).
std::string UriDecode(absl::string_view text);

// WebDataset's brace ranges expanded: "train-{000000..000002}.tar" ->
// train-000000.tar, train-000001.tar, train-000002.tar (the width of the
// first bound is kept); several ranges multiply. INVALID_ARGUMENT for a
// malformed range or more than `max_names` names.
absl::StatusOr<std::vector<std::string>> ExpandBraces(absl::string_view pattern, int64_t max_names = 10'000'000);

// A path joined below a base path: "/a" + "b/c" -> "/a/b/c".
std::string JoinKey(absl::string_view base, absl::string_view key);

// `path` without leading and trailing '/': "/a/b/" -> "a/b".
std::string TrimSlashes(absl::string_view path);

// The object that lists a directory of an HTTP(S) store, and versions an S3
// prefix's listing: "<dir>/index.txt" (trailing '/' of dir ignored).
std::string ListingIndexKey(absl::string_view dir);

}  // namespace stoker

#endif  // STOKER_STORAGE_URL_H_
