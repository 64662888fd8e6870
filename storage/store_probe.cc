#include "storage/store_probe.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace stoker {

namespace fs = std::filesystem;

absl::StatusOr<StoreProbe> ProbeStore(Storage& store, const std::string& name, int64_t max_bytes,
                                      const fs::path& scratch_parent, const BlockFetchOptions& fetch) {
  StoreProbe p;
  const absl::Time listed_at = absl::Now();
  absl::StatusOr<std::vector<ObjectInfo>> listed = store.List(name);
  if (!listed.ok()) return listed.status();
  p.list_seconds = absl::ToDoubleSeconds(absl::Now() - listed_at);
  std::vector<ObjectInfo> objects;
  for (ObjectInfo& o : *listed) {
    if (absl::StartsWith(o.key, name + "/")) objects.push_back(std::move(o));
  }
  if (objects.empty()) return absl::NotFoundError(absl::StrCat("no objects under ", store.Describe(name + "/")));
  for (const ObjectInfo& o : objects) p.dataset_bytes += o.size;
  p.dataset_objects = static_cast<int64_t>(objects.size());
  // Every k-th object, k chosen so that about max_bytes are read: shards of
  // one dataset are alike, while a tree's first folder need not be.
  const int64_t mean = std::max<int64_t>(1, p.dataset_bytes / p.dataset_objects);
  const size_t want = static_cast<size_t>(std::clamp<int64_t>(max_bytes / mean + 1, 1, p.dataset_objects));
  const size_t step = std::max<size_t>(1, objects.size() / want);
  std::vector<const ObjectInfo*> chosen;
  for (size_t i = 0; i < objects.size() && p.bytes_read < max_bytes; i += step) {
    chosen.push_back(&objects[i]);
    p.bytes_read += objects[i].size;
  }
  p.objects_read = static_cast<int64_t>(chosen.size());
  const fs::path scratch = scratch_parent / absl::StrCat("stoker-store-probe-", ::getpid());
  std::error_code ec;
  fs::create_directories(scratch, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("creating ", scratch.string(), ": ", ec.message()));
  const absl::Time start = absl::Now();
  absl::Status s = FetchObjects(store, chosen, scratch, fetch);
  p.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  fs::remove_all(scratch, ec);
  if (!s.ok()) return s;
  return p;
}

}  // namespace stoker
