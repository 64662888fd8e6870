// C++ op plugins (include/stoker/op_plugin.h): the shared objects in
// --op-plugins DIR, loaded at start, and the ops they add to the pipeline
// grammar ("team.op(args)"). OpPlugins is immutable after Load and
// thread-safe; it keeps the libraries loaded for its lifetime. A
// PluginInstance is one op of one pipeline with its parsed arguments.
#ifndef STOKER_DATAPLANE_USER_OPS_OP_PLUGINS_H_
#define STOKER_DATAPLANE_USER_OPS_OP_PLUGINS_H_

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/status/statusor.h"
#include "common/rng.h"
#include "dataplane/user_ops/user_ops.h"
#include "proto/stoker/v1/stoker.pb.h"
#include "stoker/op_plugin.h"

namespace stoker {

class OpPlugins {
 public:
  // Loads every *.so in `dir` (sorted by name). INVALID_ARGUMENT naming the
  // file: not loadable, no stoker_op_plugin entry, another ABI version, an
  // op without a dotted name or without create/apply, a name taken twice.
  static absl::StatusOr<std::shared_ptr<const OpPlugins>> Load(const std::filesystem::path& dir);
  ~OpPlugins();

  const StokerOpInfo* Find(const std::string& name) const;
  std::vector<std::string> Names() const;

 private:
  OpPlugins() = default;
  std::vector<void*> handles_;
  std::map<std::string, const StokerOpInfo*> ops_;
};

// One plugin op with its arguments parsed by the plugin (its state).
class PluginInstance {
 public:
  // INVALID_ARGUMENT naming `where` when the op is unknown or the plugin
  // refuses the arguments (with its message).
  static absl::StatusOr<std::shared_ptr<const PluginInstance>> Create(const std::string& where, const v1::PluginOp& op,
                                                                      const UserOps& user);
  ~PluginInstance();
  const StokerOpInfo& info() const { return *info_; }
  // StokerOutputSize, and the size when it is fixed.
  int OutputSize(int* height, int* width) const;
  // Runs the op on an 8-bit RGB image and `io`'s value fields (may be null:
  // none); a failure is DecodeError(kTransform) naming the op, and leaves
  // the fields as they were.
  absl::StatusOr<cv::Mat> Apply(cv::Mat image, Rng& rng, int64_t max_pixels, UserOpIo* io = nullptr) const;

 private:
  PluginInstance(std::shared_ptr<const OpPlugins> plugins, const StokerOpInfo* info, void* state)
      : plugins_(std::move(plugins)), info_(info), state_(state) {}
  const std::shared_ptr<const OpPlugins> plugins_;  // keeps the library loaded
  const StokerOpInfo* const info_;
  void* const state_;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_USER_OPS_OP_PLUGINS_H_
