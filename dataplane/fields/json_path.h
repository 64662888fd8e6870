// The value at a dotted key path of a JSON document (FieldSpec.json_path in
// stoker.proto), found by one pass of nlohmann's SAX parser that builds a
// tree only for that value: the rest of the document is checked and dropped,
// so a sample's member costs memory by the value it yields, not by its size.
// Nesting is bounded (kMaxJsonDepth) before anything recursive can see it.
// Stateless functions; thread-safe.
#ifndef STOKER_DATAPLANE_FIELDS_JSON_PATH_H_
#define STOKER_DATAPLANE_FIELDS_JSON_PATH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace stoker {

// Deepest nesting of arrays and objects a JSON member may have when read
// with a key path: deeper is a corrupt sample. nlohmann's dump() and
// comparisons recurse once per level.
inline constexpr int kMaxJsonDepth = 256;

// Most memory the tree of the value at a path may take, as estimated while
// it is built (64 bytes a value plus its strings' bytes): more is too_large.
inline constexpr int64_t kMaxJsonValueTreeBytes = int64_t{64} << 20;

// The value at `json_path` ('.'-separated object keys or array indices) of
// the document `bytes`. Failures are decode failures (image_decoder.h)
// naming `where`: bad_field when the document does not parse or lacks the
// path, corrupt when it nests deeper than kMaxJsonDepth, too_large when the
// value's tree would exceed kMaxJsonValueTreeBytes. A key given twice keeps
// its last value, as nlohmann's parse() does.
absl::StatusOr<nlohmann::json> FindJsonPath(const std::string& bytes, absl::string_view json_path,
                                            const std::string& where);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_FIELDS_JSON_PATH_H_
