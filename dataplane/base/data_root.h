// Names under the data root: the rules by which a client's name (a dataset, an
// annotations file, a tokenizer) becomes a path, so that nothing a request
// names can reach outside --data-root. Pure functions of the file system.
#ifndef STOKER_DATAPLANE_BASE_DATA_ROOT_H_
#define STOKER_DATAPLANE_BASE_DATA_ROOT_H_

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace stoker {

// Whether `path` is `root` or below it (both canonical).
bool IsUnder(const std::filesystem::path& path, const std::filesystem::path& root);

// `name` under `data_root` (`what` names it in errors): INVALID_ARGUMENT for
// an empty name, PERMISSION_DENIED for an absolute name, one with "..", or
// one that resolves (through symlinks) outside the root; NOT_FOUND when it is
// not a directory (`directory`) or else a regular file. With `must_exist`
// false, only the name's rules (for a name that is fetched before it is opened).
absl::StatusOr<std::filesystem::path> ResolveUnderRoot(const std::filesystem::path& data_root, const std::string& name,
                                                       const char* what, bool directory, bool must_exist = true);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_BASE_DATA_ROOT_H_
