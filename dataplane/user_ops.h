// The operator's own ops a pipeline may name beside the built-in ones:
// python(module:function) run by a PythonStage (python_stage.h), and the ops
// of C++ plugins loaded at start (op_plugins.h). Either part may be null (the
// server was started without it: a session naming such an op is refused).
// Pipelines hold a copy, which keeps the parts alive; thread-safe as they are.
#ifndef STOKER_DATAPLANE_USER_OPS_H_
#define STOKER_DATAPLANE_USER_OPS_H_

#include <memory>

namespace stoker {

class PythonStage;
class OpPlugins;

struct UserOps {
  std::shared_ptr<PythonStage> python;
  std::shared_ptr<const OpPlugins> plugins;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_USER_OPS_H_
