// HTTP(S) as a Storage: keys are paths below a base URL; Stat is a HEAD,
// reads are ranged GETs pinned to the first ETag seen (If-Match). HTTP has no
// listing, so a directory lists its objects in a file: List("ds") reads
// <base>/ds/index.txt, one path relative to ds/ per line ('#' comments,
// WebDataset brace ranges such as train-{000000..000127}.tar expanded), and
// HEADs each. A bearer token from a file goes with each request. Thread-safe.
#ifndef STOKER_STORAGE_HTTP_STORAGE_H_
#define STOKER_STORAGE_HTTP_STORAGE_H_

#include <memory>
#include <string>
#include <vector>

#include "storage/storage.h"
#include "storage/url.h"

namespace stoker {

absl::StatusOr<std::unique_ptr<Storage>> OpenHttpStorage(const Url& root, const StorageOptions& options);

// The keys an index.txt names, below `dir` ("dir/<line>"), braces expanded.
absl::StatusOr<std::vector<std::string>> ParseIndexFile(const std::string& dir, const std::string& text);

}  // namespace stoker

#endif  // STOKER_STORAGE_HTTP_STORAGE_H_
