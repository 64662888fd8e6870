// CatalogStorage: a small catalog file that names datasets and says where
// each lives, seen as one store whose top-level names are the datasets, so
// that a mirror (store_mirror.h) and every program that takes a data root
// serve them as if they sat under one root. A data root "catalog:FILE".
//
// The file, one dataset per line ('#' starts a comment):
//
//   imagenet-train  s3://bucket/imagenet/train              # a directory (listed)
//   laion           https://host/laion/{000000..000127}.tar # exactly these objects
//
// A directory's objects are listed as a data root's dataset is (S3 listing;
// HTTP's index.txt); a brace range in the last path segment names the objects
// themselves (each checked with a HEAD). Keys are "NAME/..." below the
// catalog; an annotations file or tokenizer model lives inside a dataset's
// entry ("NAME/annotations.json"). Thread-safe.
#ifndef STOKER_STORAGE_CATALOG_STORAGE_H_
#define STOKER_STORAGE_CATALOG_STORAGE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/storage.h"

namespace stoker {

inline constexpr char kCatalogScheme[] = "catalog:";

// The catalog in `text` (read from `file`, named in messages);
// INVALID_ARGUMENT naming the line that is wrong.
absl::StatusOr<std::unique_ptr<Storage>> OpenCatalogStorage(const std::string& file, const std::string& text,
                                                            const StorageOptions& options);

}  // namespace stoker

#endif  // STOKER_STORAGE_CATALOG_STORAGE_H_
