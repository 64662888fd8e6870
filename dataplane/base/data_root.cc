#include "dataplane/base/data_root.h"

#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stoker {

namespace fs = std::filesystem;

bool IsUnder(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

absl::StatusOr<fs::path> ResolveUnderRoot(const fs::path& data_root, const std::string& name, const char* what,
                                          bool directory, bool must_exist) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty name"));
  const fs::path rel(name);
  if (rel.is_absolute()) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " '", name, "' is an absolute path; give a name under --data-root"));
  }
  for (const auto& part : rel) {
    if (part == "..") {
      return absl::PermissionDeniedError(
          absl::StrCat(what, " '", name, "' contains '..'; it must stay under --data-root"));
    }
  }
  std::error_code ec;
  const fs::path root = fs::canonical(data_root, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("--data-root ", data_root.string(), ": ", ec.message()));
  const fs::path dir = fs::weakly_canonical(root / rel, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(what, " '", name, "': ", ec.message()));
  if (!IsUnder(dir, root)) {
    return absl::PermissionDeniedError(
        absl::StrCat(what, " '", name, "' resolves outside --data-root (through a symlink)"));
  }
  if (must_exist && (directory ? !fs::is_directory(dir, ec) : !fs::is_regular_file(dir, ec))) {
    return absl::NotFoundError(absl::StrCat(what, " '", name, "' not found under --data-root"));
  }
  return dir;
}

}  // namespace stoker
