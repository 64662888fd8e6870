// HTTP(S) as a Storage: keys are paths below a base URL; Stat is a HEAD,
// reads are ranged GETs pinned to the first ETag seen (If-Match). Plain HTTP
// has no listing (List is UNIMPLEMENTED: name shards with a brace list or a
// catalog). A bearer token from a file goes with each request. Thread-safe.
#ifndef STOKER_STORAGE_HTTP_STORAGE_H_
#define STOKER_STORAGE_HTTP_STORAGE_H_

#include <memory>

#include "storage/storage.h"
#include "storage/url.h"

namespace stoker {

absl::StatusOr<std::unique_ptr<Storage>> OpenHttpStorage(const Url& root, const StorageOptions& options);

// Last-Modified's time (RFC 7231 IMF-fixdate) in ns since the epoch; 0 when
// it does not parse.
int64_t ParseHttpDateNs(const std::string& text);

}  // namespace stoker

#endif  // STOKER_STORAGE_HTTP_STORAGE_H_
