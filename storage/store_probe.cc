#include "storage/store_probe.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace stoker {

namespace {

struct Range {
  const ObjectInfo* object;
  int64_t offset = 0, length = 0;
};

}  // namespace

absl::StatusOr<StoreProbe> ProbeStore(Storage& store, const std::string& name, int64_t max_bytes,
                                      const BlockFetchOptions& fetch) {
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
  // one dataset are alike, while a tree's first folder need not be. The last
  // one is read only as far as the bound (a 256 MB probe never reads a 5 GB
  // shard whole), each in the mirror's block reads.
  const int64_t mean = std::max<int64_t>(1, p.dataset_bytes / p.dataset_objects);
  const size_t want = static_cast<size_t>(std::clamp<int64_t>(max_bytes / mean + 1, 1, p.dataset_objects));
  const size_t step = std::max<size_t>(1, objects.size() / want);
  const int64_t block = std::max<int64_t>(1, fetch.block_bytes);
  std::vector<Range> ranges;
  for (size_t i = 0; i < objects.size() && p.bytes_read < max_bytes; i += step) {
    const int64_t take = std::min(objects[i].size, max_bytes - p.bytes_read);
    for (int64_t at = 0; at < take; at += block) ranges.push_back({&objects[i], at, std::min(block, take - at)});
    p.bytes_read += take;
    ++p.objects_read;
  }
  std::atomic<size_t> next{0};
  absl::Mutex mu;
  absl::Status error;
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < std::min<int>(std::max(1, fetch.parallel), static_cast<int>(ranges.size())); ++t) {
    threads.emplace_back([&] {
      std::string bytes;
      for (size_t i; (i = next.fetch_add(1)) < ranges.size();) {
        bytes.clear();
        const Range& r = ranges[i];
        const absl::Status s = ReadWholeRange(store, *r.object, r.offset, r.length, &bytes);
        if (!s.ok()) {
          absl::MutexLock lock(&mu);
          if (error.ok()) error = s;
          next.store(ranges.size());  // the others stop
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  p.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!error.ok()) return error;
  return p;
}

}  // namespace stoker
