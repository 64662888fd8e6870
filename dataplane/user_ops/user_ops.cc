#include "dataplane/user_ops/user_ops.h"

#include "dataplane/base/server_metrics.h"
#include "dataplane/user_ops/op_plugins.h"
#include "dataplane/user_ops/python_stage.h"

namespace stoker {

absl::StatusOr<UserOps> StartUserOps(const PythonStageConfig& python, const std::filesystem::path& op_plugins,
                                     ServerMetrics* metrics) {
  UserOps user;
  if (!python.modules.empty()) {
    absl::StatusOr<std::unique_ptr<PythonStage>> stage = PythonStage::Start(python, metrics);
    if (!stage.ok()) return stage.status();
    user.python = *std::move(stage);
    if (metrics != nullptr) metrics->python_workers->Set(user.python->processes());
  }
  if (!op_plugins.empty()) {
    absl::StatusOr<std::shared_ptr<const OpPlugins>> plugins = OpPlugins::Load(op_plugins);
    if (!plugins.ok()) return plugins.status();
    user.plugins = *std::move(plugins);
  }
  return user;
}

}  // namespace stoker
