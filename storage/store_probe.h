// How fast a store delivers a dataset to this machine: the copy a data
// server makes on a cold cache (store_mirror.h), made for a bounded part of
// the dataset and timed. stoker-diagnose's cold-cache step. Thread-compatible.
#ifndef STOKER_STORAGE_STORE_PROBE_H_
#define STOKER_STORAGE_STORE_PROBE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "storage/block_fetch.h"
#include "storage/storage.h"

namespace stoker {

struct StoreProbe {
  int64_t dataset_objects = 0;  // listed under the name
  int64_t dataset_bytes = 0;
  int64_t objects_read = 0;  // copied by the probe
  int64_t bytes_read = 0;
  double seconds = 0;  // the copy's wall time (the listing left out)
  double list_seconds = 0;
  double bytes_per_second() const { return seconds > 0 ? bytes_read / seconds : 0; }
  // Seconds a cold cache's copy of the whole dataset takes at that rate.
  double copy_seconds() const { return bytes_per_second() > 0 ? dataset_bytes / bytes_per_second() : 0; }
};

// Lists `name` (a dataset's prefix, as StoreMirror::Ensure does) and reads
// its objects in `fetch`'s ranged reads, `fetch.parallel` in flight, until
// `max_bytes` are read (objects spread over the listing, not only its first
// ones; the last one read only as far as the bound). The bytes are dropped:
// the time is the store's and the network's, not the cache disk's.
// NOT_FOUND when nothing is listed there; the store's errors as they come.
absl::StatusOr<StoreProbe> ProbeStore(Storage& store, const std::string& name, int64_t max_bytes,
                                      const BlockFetchOptions& fetch);

}  // namespace stoker

#endif  // STOKER_STORAGE_STORE_PROBE_H_
