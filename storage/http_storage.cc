#include "storage/http_storage.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "storage/http_client.h"

namespace stoker {
namespace {

class HttpStorage final : public Storage {
 public:
  HttpStorage(Url root, const StorageOptions& options, std::string token)
      : root_(std::move(root)),
        parallel_(options.list_parallel),
        client_(options, [token = std::move(token)](HttpRequest* r, absl::Time) {
          if (!token.empty()) r->headers.emplace_back("Authorization", absl::StrCat("Bearer ", token));
          return absl::OkStatus();
        }) {}

  std::string root() const override { return root_.Origin() + root_.path; }
  std::string Describe(absl::string_view key) const override {
    return root_.Origin() + JoinKey(root_.path, UriEncode(key, /*keep_slash=*/true));
  }
  StorageCounters counters() const override { return client_.counters(); }

  absl::StatusOr<ObjectInfo> Stat(absl::string_view key) override {
    HttpRequest r;
    r.method = "HEAD";
    r.url = Describe(key);
    absl::StatusOr<HttpResponse> got = client_.Fetch(r);
    if (!got.ok()) return got.status();
    return ObjectFromHead(key, *got, r.url);
  }

  absl::StatusOr<std::vector<ObjectInfo>> List(absl::string_view prefix) override {
    std::string version;
    return ListVersioned(prefix, &version);
  }

  // The index's GET gives its version too (one request fewer than a HEAD first).
  absl::StatusOr<std::vector<ObjectInfo>> ListVersioned(absl::string_view prefix, std::string* version) override {
    HttpRequest r;
    r.url = Describe(ListingIndexKey(prefix));
    absl::StatusOr<HttpResponse> got = client_.Fetch(r);
    if (!got.ok()) return IndexError(got.status(), r.url);
    if (absl::StatusOr<ObjectInfo> index = ObjectFromHead(ListingIndexKey(prefix), *got, r.url); index.ok()) {
      *version = Version(*index);
    }
    absl::StatusOr<std::vector<std::string>> keys =
        ParseIndexFile(JoinKey(prefix, ""), got->body);  // the prefix without a trailing /
    if (!keys.ok()) return absl::InvalidArgumentError(absl::StrCat(r.url, ": ", keys.status().message()));
    // Each listed object's size and ETag, list_parallel HEADs at a time.
    absl::StatusOr<std::vector<ObjectInfo>> listed = StatAll(*this, *keys, parallel_);
    if (!listed.ok()) {
      return absl::Status(listed.status().code(), absl::StrCat("listed in ", r.url, ": ", listed.status().message()));
    }
    std::vector<ObjectInfo> out = *std::move(listed);
    std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
  }

  // The index file's ETag (else its size and time): one HEAD.
  absl::StatusOr<std::string> ListingVersion(absl::string_view prefix) override {
    const std::string url = Describe(ListingIndexKey(prefix));
    absl::StatusOr<ObjectInfo> index = Stat(ListingIndexKey(prefix));
    if (!index.ok()) return IndexError(index.status(), url);
    return Version(*index);
  }

  absl::Status ReadRange(const ObjectInfo& object, int64_t offset, int64_t length, std::string* out) override {
    if (absl::Status s = CheckRange(*this, object, offset, length); !s.ok() || length == 0) return s;
    HttpRequest r;
    r.url = Describe(object.key);
    r.range_start = offset;
    r.range_length = length;
    if (!object.etag.empty()) r.headers.emplace_back("If-Match", object.etag);
    absl::StatusOr<HttpResponse> got = client_.Fetch(r);
    if (!got.ok()) return got.status();
    if (out->empty()) {
      *out = std::move(got->body);
    } else {
      out->append(got->body);
    }
    return absl::OkStatus();
  }

 private:
  // An index's ETag, else its size and modification time.
  static std::string Version(const ObjectInfo& index) {
    if (!index.etag.empty()) return index.etag;
    return index.mtime_ns > 0 ? absl::StrCat(index.size, "@", index.mtime_ns) : std::string();
  }
  static absl::Status IndexError(const absl::Status& status, const std::string& url) {
    if (!absl::IsNotFound(status)) return status;
    return absl::NotFoundError(absl::StrCat(url,
                                            " not found: an HTTP(S) directory lists its objects in index.txt "
                                            "(one path per line; brace ranges such as "
                                            "train-{000000..000127}.tar expand)"));
  }

  const Url root_;
  const int parallel_;
  HttpClient client_;
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseIndexFile(const std::string& dir, const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    absl::StatusOr<std::vector<std::string>> names = ExpandBraces(line);
    if (!names.ok()) return names.status();
    for (std::string& n : *names) out.push_back(JoinKey(dir, n));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Storage>> OpenHttpStorage(const Url& root, const StorageOptions& options) {
  std::string token;
  if (!options.http_bearer_token_file.empty()) {
    std::ifstream in(options.http_bearer_token_file);
    if (!in || !std::getline(in, token) || absl::StripAsciiWhitespace(token).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("bearer token file ", options.http_bearer_token_file,
                                                     " cannot be read or its first line is empty"));
    }
    token = std::string(absl::StripAsciiWhitespace(token));
  }
  return std::unique_ptr<Storage>(new HttpStorage(root, options, std::move(token)));
}

}  // namespace stoker
