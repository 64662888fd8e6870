#include "storage/catalog_storage.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "storage/url.h"

namespace stoker {
namespace {

// `rest` below the key `base` ("" the store's root).
std::string Under(const std::string& base, absl::string_view rest) {
  return base.empty() ? std::string(rest) : absl::StrCat(base, "/", rest);
}

// One dataset of the catalog.
struct Entry {
  std::string name;               // what sessions ask for
  std::string url;                // as the file says
  Storage* store = nullptr;       // the origin's (shared by the entries there)
  std::string base;               // the directory's key in `store`
  std::vector<std::string> keys;  // a brace list's objects (keys in `store`); empty: list `base`
};

class CatalogStorage final : public Storage {
 public:
  CatalogStorage(std::string file, std::map<std::string, std::unique_ptr<Storage>> stores, std::vector<Entry> entries,
                 int parallel)
      : file_(std::move(file)), stores_(std::move(stores)), entries_(std::move(entries)), parallel_(parallel) {}

  std::string root() const override { return kCatalogScheme + file_; }
  std::string Describe(absl::string_view key) const override {
    if (const Entry* named = Named(key)) return absl::StrCat(named->name, " (", named->url, ")");
    std::string rest;
    const Entry* e = Find(key, &rest);
    return e == nullptr ? absl::StrCat(root(), ": ", key) : e->store->Describe(Under(e->base, rest));
  }

  absl::StatusOr<ObjectInfo> Stat(absl::string_view key) override {
    std::string rest;
    const Entry* e = Find(key, &rest);
    if (e == nullptr || rest.empty()) return NotListed(key);
    absl::StatusOr<ObjectInfo> info = e->store->Stat(Under(e->base, rest));
    if (info.ok()) info->key = std::string(key);
    return info;
  }

  absl::StatusOr<std::vector<ObjectInfo>> List(absl::string_view prefix) override {
    const Entry* e = Named(prefix);
    if (e == nullptr) return NotListed(prefix);
    absl::StatusOr<std::vector<ObjectInfo>> listed =
        e->keys.empty() ? e->store->List(e->base) : StatAll(*e->store, e->keys, parallel_);
    if (!listed.ok()) return listed.status();
    std::vector<ObjectInfo> out;
    const std::string below = e->base.empty() ? "" : e->base + "/";
    for (ObjectInfo& o : *listed) {
      if (!absl::StartsWith(o.key, below)) continue;  // a sibling of the directory
      o.key = absl::StrCat(e->name, "/", o.key.substr(below.size()));
      out.push_back(std::move(o));
    }
    std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.key < b.key; });
    return out;
  }

  absl::StatusOr<std::string> ListingVersion(absl::string_view prefix) override {
    const Entry* e = Named(prefix);
    if (e == nullptr) return NotListed(prefix);
    return e->keys.empty() ? e->store->ListingVersion(e->base) : absl::StatusOr<std::string>(std::string());
  }

  absl::Status ReadRange(const ObjectInfo& object, int64_t offset, int64_t length, std::string* out) override {
    std::string rest;
    const Entry* e = Find(object.key, &rest);
    if (e == nullptr || rest.empty()) return NotListed(object.key);
    ObjectInfo inner = object;
    inner.key = Under(e->base, rest);
    return e->store->ReadRange(inner, offset, length, out);
  }

  StorageCounters counters() const override {
    StorageCounters sum;
    for (const auto& [origin, store] : stores_) {
      const StorageCounters c = store->counters();
      sum.requests += c.requests;
      sum.bytes += c.bytes;
      sum.retries += c.retries;
      for (const auto& [reason, n] : c.retries_by_reason) sum.retries_by_reason[reason] += n;
      if (sum.latency_counts.size() < c.latency_counts.size()) sum.latency_counts.resize(c.latency_counts.size());
      for (size_t i = 0; i < c.latency_counts.size(); ++i) sum.latency_counts[i] += c.latency_counts[i];
      sum.latency_seconds += c.latency_seconds;
    }
    return sum;
  }

 private:
  // The entry whose name is `prefix` (a trailing '/' allowed).
  const Entry* Named(absl::string_view prefix) const {
    absl::ConsumeSuffix(&prefix, "/");
    for (const Entry& e : entries_) {
      if (e.name == prefix) return &e;
    }
    return nullptr;
  }
  // The entry `key` is below ("NAME/rest"; the longest name wins), and the rest.
  const Entry* Find(absl::string_view key, std::string* rest) const {
    const Entry* best = nullptr;
    for (const Entry& e : entries_) {
      if (absl::StartsWith(key, e.name + "/") && (best == nullptr || e.name.size() > best->name.size())) best = &e;
    }
    if (best != nullptr) *rest = std::string(key.substr(best->name.size() + 1));
    return best;
  }
  absl::Status NotListed(absl::string_view key) const {
    return absl::NotFoundError(absl::StrCat("'", key, "' is not a dataset of the catalog ", file_));
  }

  const std::string file_;
  const std::map<std::string, std::unique_ptr<Storage>> stores_;  // by origin
  const std::vector<Entry> entries_;
  const int parallel_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Storage>> OpenCatalogStorage(const std::string& file, const std::string& text,
                                                            const StorageOptions& options) {
  std::map<std::string, std::unique_ptr<Storage>> stores;
  std::vector<Entry> entries;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(file, " line ", line_number, ": ", why));
    };
    const std::vector<std::string> words = absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.size() != 2) return bad("expected a dataset name and its URL");
    Entry e;
    e.name = words[0];
    e.url = words[1];
    for (absl::string_view part : absl::StrSplit(e.name, '/')) {
      if (part.empty() || part == "." || part == "..") return bad(absl::StrCat("'", e.name, "' is not a dataset name"));
    }
    for (const Entry& other : entries) {
      if (other.name == e.name) return bad(absl::StrCat("'", e.name, "' is named twice"));
      // Copies live at NAME/...: one dataset may not sit inside another.
      if (absl::StartsWith(e.name, other.name + "/") || absl::StartsWith(other.name, e.name + "/")) {
        return bad(absl::StrCat("'", e.name, "' and '", other.name, "' would nest (one inside the other)"));
      }
    }
    absl::StatusOr<Url> url = ParseUrl(e.url);
    if (!url.ok() || (url->scheme != "s3" && url->scheme != "http" && url->scheme != "https")) {
      return bad(absl::StrCat("'", e.url, "' is not an s3://, http:// or https:// URL",
                              url.ok() ? "" : absl::StrCat(" (", url.status().message(), ")")));
    }
    const std::string origin = url->scheme == "s3" ? absl::StrCat("s3://", url->host) : url->Origin();
    const std::string path = TrimSlashes(UriDecode(url->path));
    const size_t slash = path.rfind('/');
    const std::string last = slash == std::string::npos ? path : path.substr(slash + 1);
    if (last.find('{') != std::string::npos) {  // a brace list of objects
      e.base = slash == std::string::npos ? "" : path.substr(0, slash);
      absl::StatusOr<std::vector<std::string>> names = ExpandBraces(last);
      if (!names.ok()) return bad(names.status().message());
      for (const std::string& n : *names) e.keys.push_back(Under(e.base, n));
    } else {
      e.base = path;
    }
    if (!stores.count(origin)) {
      absl::StatusOr<std::unique_ptr<Storage>> store = OpenStorage(origin, options);
      if (!store.ok()) return bad(store.status().message());
      stores[origin] = *std::move(store);
    }
    e.store = stores[origin].get();
    entries.push_back(std::move(e));
  }
  if (entries.empty()) return absl::InvalidArgumentError(absl::StrCat(file, ": no datasets in the catalog"));
  return std::unique_ptr<Storage>(
      new CatalogStorage(file, std::move(stores), std::move(entries), std::max(1, options.list_parallel)));
}

}  // namespace stoker
