#include "storage/s3_storage.h"

#include <tinyxml2.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "storage/aws_credentials.h"
#include "storage/http_client.h"
#include "storage/sigv4.h"

namespace stoker {
namespace {

const char* Text(const tinyxml2::XMLElement* e, const char* child) {
  const tinyxml2::XMLElement* c = e->FirstChildElement(child);
  return c != nullptr && c->GetText() != nullptr ? c->GetText() : "";
}

struct Endpoint {
  Url origin;        // scheme://host[:port] requests go to
  std::string base;  // "/bucket" (path-style) or "" (virtual-hosted)
};

class S3Storage final : public Storage {
 public:
  S3Storage(std::string bucket, std::string prefix, Endpoint endpoint, std::string region, bool anonymous,
            const StorageOptions& options)
      : bucket_(std::move(bucket)),
        prefix_(std::move(prefix)),
        endpoint_(std::move(endpoint)),
        region_(std::move(region)),
        client_(options, [this, anonymous](HttpRequest* r, absl::Time now) { return Sign(r, now, anonymous); }) {}

  std::string root() const override { return prefix_.empty() ? "s3://" + bucket_ : "s3://" + bucket_ + "/" + prefix_; }
  std::string Describe(absl::string_view key) const override { return JoinKey(root(), key); }
  StorageCounters counters() const override { return client_.counters(); }

  absl::StatusOr<ObjectInfo> Stat(absl::string_view key) override {
    HttpRequest r = Request("HEAD", FullKey(key), {});
    absl::StatusOr<HttpResponse> got = client_.Fetch(r);
    if (!got.ok()) return Named(got.status(), key);
    return ObjectFromHead(key, *got, Describe(key));
  }

  // An index.txt in the prefix versions its listing (its ETag, from one
  // HEAD): a cache listed while it had that ETag need not list again. Without
  // one, "" (list every time).
  absl::StatusOr<std::string> ListingVersion(absl::string_view prefix) override {
    absl::StatusOr<ObjectInfo> index = Stat(ListingIndexKey(prefix));
    // None, or not readable (a HEAD's 403 carries no reason): the listing
    // itself then says what is wrong.
    if (absl::IsNotFound(index.status()) || absl::IsPermissionDenied(index.status())) return std::string();
    if (!index.ok()) return index.status();
    return index->etag;
  }

  absl::StatusOr<std::vector<ObjectInfo>> List(absl::string_view prefix) override {
    std::vector<ObjectInfo> out;
    const std::string full = FullKey(prefix);
    std::string token;
    for (int page = 0;; ++page) {
      std::vector<std::pair<std::string, std::string>> query = {{"list-type", "2"}, {"prefix", full}};
      if (!token.empty()) query.emplace_back("continuation-token", token);
      absl::StatusOr<HttpResponse> got = client_.Fetch(Request("GET", "", query));
      if (!got.ok()) return Named(got.status(), prefix);
      absl::StatusOr<ListPage> parsed = ParseListObjectsV2(got->body);
      if (!parsed.ok()) {
        return absl::UnavailableError(absl::StrCat("listing ", Describe(prefix), ": ", parsed.status().message()));
      }
      for (ObjectInfo& o : parsed->objects) {
        if (!prefix_.empty()) o.key = o.key.substr(prefix_.size() + 1);
        out.push_back(std::move(o));
      }
      if (!parsed->truncated) break;
      if (parsed->next_token.empty()) {
        return absl::UnavailableError(absl::StrCat("listing ", Describe(prefix), ": page ", page + 1,
                                                   " is truncated but names no continuation token"));
      }
      token = parsed->next_token;
    }
    return out;
  }

  absl::Status ReadRange(const ObjectInfo& object, int64_t offset, int64_t length, std::string* out) override {
    if (absl::Status s = CheckRange(*this, object, offset, length); !s.ok() || length == 0) return s;
    HttpRequest r = Request("GET", FullKey(object.key), {});
    r.range_start = offset;
    r.range_length = length;
    if (!object.etag.empty()) r.headers.emplace_back("If-Match", object.etag);
    absl::StatusOr<HttpResponse> got = client_.Fetch(r);
    if (!got.ok()) return Named(got.status(), object.key);
    if (out->empty()) {
      *out = std::move(got->body);
    } else {
      out->append(got->body);
    }
    return absl::OkStatus();
  }

 private:
  std::string FullKey(absl::string_view key) const {
    return prefix_.empty() ? std::string(key) : absl::StrCat(prefix_, "/", key);
  }

  HttpRequest Request(const char* method, const std::string& key,
                      std::vector<std::pair<std::string, std::string>> query) const {
    HttpRequest r;
    r.method = method;
    r.host = endpoint_.origin.port == 0 ? endpoint_.origin.host
                                        : absl::StrCat(endpoint_.origin.host, ":", endpoint_.origin.port);
    // The bucket itself (a listing) is "/bucket" path-style and "/" virtual-hosted.
    r.path = key.empty() ? (endpoint_.base.empty() ? "/" : endpoint_.base)
                         : absl::StrCat(endpoint_.base, "/", UriEncode(key, /*keep_slash=*/true));
    r.query = std::move(query);
    const std::string q = CanonicalQuery(r.query);
    r.url = absl::StrCat(endpoint_.origin.Origin(), r.path, q.empty() ? "" : "?", q);
    return r;
  }

  absl::Status Sign(HttpRequest* r, absl::Time now, bool anonymous) {
    if (anonymous) return absl::OkStatus();
    absl::StatusOr<AwsCredentials> c = credentials_.Get();
    if (!c.ok()) return c.status();
    SigV4Request s{r->method, r->host, r->path, r->query, {}, ""};
    for (auto& h : SignV4(s, *c, region_, "s3", now)) r->headers.push_back(std::move(h));
    return absl::OkStatus();
  }

  // The store's answer, with the object's s3:// name in front.
  absl::Status Named(const absl::Status& s, absl::string_view key) const {
    return absl::Status(s.code(), absl::StrCat(Describe(key), ": ", s.message()));
  }

  const std::string bucket_;
  const std::string prefix_;  // without slashes at either end
  const Endpoint endpoint_;
  const std::string region_;
  AwsCredentialChain credentials_;
  HttpClient client_;
};

}  // namespace

absl::StatusOr<ListPage> ParseListObjectsV2(const std::string& xml) {
  tinyxml2::XMLDocument doc;
  if (doc.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS ||
      doc.FirstChildElement("ListBucketResult") == nullptr) {
    return absl::InvalidArgumentError("the answer is not a ListBucketResult document");
  }
  const tinyxml2::XMLElement* root = doc.FirstChildElement("ListBucketResult");
  ListPage page;
  page.truncated = std::string(Text(root, "IsTruncated")) == "true";
  page.next_token = Text(root, "NextContinuationToken");
  for (const tinyxml2::XMLElement* c = root->FirstChildElement("Contents"); c != nullptr;
       c = c->NextSiblingElement("Contents")) {
    ObjectInfo o;
    o.key = Text(c, "Key");
    if (o.key.empty() || !absl::SimpleAtoi(Text(c, "Size"), &o.size)) {
      return absl::InvalidArgumentError("a Contents entry without a Key or a Size");
    }
    o.etag = Text(c, "ETag");
    absl::Time t;
    std::string err;
    if (absl::ParseTime(absl::RFC3339_full, Text(c, "LastModified"), &t, &err)) o.mtime_ns = absl::ToUnixNanos(t);
    page.objects.push_back(std::move(o));
  }
  return page;
}

absl::StatusOr<std::unique_ptr<Storage>> OpenS3Storage(const Url& root, const StorageOptions& options) {
  if (root.port != 0) return absl::InvalidArgumentError("s3:// URLs name a bucket, not a host:port (--s3-endpoint)");
  const std::string prefix = TrimSlashes(root.path);
  std::string region = options.s3_region.empty() ? AwsRegionFromEnv() : options.s3_region;
  std::string endpoint_text =
      options.s3_endpoint.empty() ? AwsEndpointFromEnv("AWS_ENDPOINT_URL_S3") : options.s3_endpoint;
  const bool aws = endpoint_text.empty();
  if (aws) endpoint_text = absl::StrCat("https://s3.", region, ".amazonaws.com");
  absl::StatusOr<Url> endpoint = ParseUrl(endpoint_text);
  if (!endpoint.ok() || (endpoint->scheme != "http" && endpoint->scheme != "https")) {
    return absl::InvalidArgumentError(absl::StrCat("S3 endpoint '", endpoint_text, "' is not an http(s) URL"));
  }
  using A = StorageOptions::Addressing;
  const bool virtual_hosted = options.s3_addressing == A::kVirtual ||
                              (options.s3_addressing == A::kAuto && aws && root.host.find('.') == std::string::npos);
  Endpoint e;
  e.origin = *endpoint;
  e.origin.path.clear();
  if (virtual_hosted) {
    e.origin.host = absl::StrCat(root.host, ".", endpoint->host);
  } else {
    e.base = absl::StrCat("/", root.host);
  }
  return std::unique_ptr<Storage>(
      new S3Storage(root.host, std::move(prefix), std::move(e), std::move(region), options.s3_anonymous, options));
}

}  // namespace stoker
