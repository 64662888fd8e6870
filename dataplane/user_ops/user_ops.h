// The operator's own ops a pipeline may name beside the built-in ones:
// python(module:function) run by a PythonStage (python_stage.h), and the ops
// of C++ plugins loaded at start (op_plugins.h). Either part may be null (the
// server was started without it: a session naming such an op is refused).
// Pipelines hold a copy, which keeps the parts alive; thread-safe as they are.
#ifndef STOKER_DATAPLANE_USER_OPS_USER_OPS_H_
#define STOKER_DATAPLANE_USER_OPS_USER_OPS_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

class PythonStage;
class OpPlugins;
struct PythonStageConfig;
struct ServerMetrics;

struct UserOps {
  std::shared_ptr<PythonStage> python;
  std::shared_ptr<const OpPlugins> plugins;
};

// Starts the Python stage (when `python` names modules) and loads the
// plugins in `op_plugins` (when not empty): the errors of PythonStage::Start
// and OpPlugins::Load. `metrics` (nullable) gets the stage's gauge and counters.
absl::StatusOr<UserOps> StartUserOps(const PythonStageConfig& python, const std::filesystem::path& op_plugins,
                                     ServerMetrics* metrics);

// A value field of the sample (a caption, a class, tokens...) as a python(...)
// op sees it: a NumPy array of its encoded values (uint8 for text, bytes
// and json; int32 for class, classes and tokens; float32 for number), which
// the function may replace. `value` belongs to the caller.
struct UserOpField {
  std::string name;
  v1::FieldKind kind = v1::FIELD_KIND_UNSPECIFIED;
  std::string* value = nullptr;
};

// What user ops exchange with the rest of a sample besides its image, for
// one sample on one thread.
struct UserOpIo {
  absl::Duration python_time;       // spent in python(...) ops
  std::vector<UserOpField> fields;  // the sample's value fields
  int64_t max_field_bytes = 0;      // a changed value's limit (the session's max_field_bytes)
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_USER_OPS_USER_OPS_H_
