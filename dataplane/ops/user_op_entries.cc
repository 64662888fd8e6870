// The user ops' entries in the op registry: python(module:function) and
// plugin ops (team.op). Their text form is pipeline_text_user_ops.cc's; what
// the server loaded for them (its Python stage, its plugins: user_ops.h)
// checks and runs them, through their UserOpHooks (op_entry.h), so that the
// pipeline and the text form find them as they find every other op.
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/ops/pipeline_text_internal.h"
#include "dataplane/user_ops/op_plugins.h"
#include "dataplane/user_ops/python_stage.h"

namespace stoker {
namespace {

absl::Status CheckPython(const std::string& where, v1::Op& op, OpShape*, const UserOps& user,
                         std::shared_ptr<const PluginInstance>*) {
  if (user.python == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " ", PipelineToText({op}),
        ": this server runs no Python transforms (the operator starts it with --python-transforms MODULES)"));
  }
  return user.python->Check(where, op.python());  // the size stays as it was (checked when it runs)
}

// A plugin op: the plugin checks its arguments (making the instance the
// pipeline keeps, *plugin); its output size.
absl::Status CheckPlugin(const std::string& where, v1::Op& op, OpShape* shape, const UserOps& user,
                         std::shared_ptr<const PluginInstance>* plugin) {
  absl::StatusOr<std::shared_ptr<const PluginInstance>> instance = PluginInstance::Create(where, op.plugin(), user);
  if (!instance.ok()) return instance.status();
  *plugin = *instance;
  int oh = 0, ow = 0;
  switch ((*instance)->OutputSize(&oh, &ow)) {
    case STOKER_SIZE_FIXED:
      if (oh < 1 || ow < 1 || oh > kMaxImageSide || ow > kMaxImageSide) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".", op.plugin().name(), " makes ", ow, "x", oh,
                                                       " pixels; each side must be 1..", kMaxImageSide));
      }
      shape->fixed = true;
      shape->height = oh;
      shape->width = ow;
      break;
    case STOKER_SIZE_VARIES: shape->fixed = false; break;
    default: break;
  }
  return absl::OkStatus();
}

bool PluginIsRandom(const v1::Op& op, const UserOps& user) {
  const StokerOpInfo* info = user.plugins ? user.plugins->Find(op.plugin().name()) : nullptr;
  return info == nullptr || info->random != 0 || (op.plugin().has_p() && op.plugin().p() < 1);
}

absl::StatusOr<std::optional<cv::Mat>> RunPython(const v1::Op& op, const UserOps& user, const PluginInstance*,
                                                 size_t position, const cv::Mat& image, Rng& rng, int64_t max_pixels,
                                                 UserOpIo* io) {
  if (!PassesGate(op.python().has_p(), op.python().p(), 1, rng)) return std::nullopt;
  if (user.python == nullptr) return DecodeError(DecodeFailure::kTransform, "python ops need a Python stage");
  const absl::Time t0 = absl::Now();
  absl::StatusOr<cv::Mat> out = user.python->Run(op.python(), position, rng.origin(), image, max_pixels, io);
  if (io != nullptr) io->python_time += absl::Now() - t0;
  if (!out.ok()) return out.status();
  return *std::move(out);
}

absl::StatusOr<std::optional<cv::Mat>> RunPlugin(const v1::Op& op, const UserOps&, const PluginInstance* plugin, size_t,
                                                 const cv::Mat& image, Rng& rng, int64_t max_pixels, UserOpIo* io) {
  if (!PassesGate(op.plugin().has_p(), op.plugin().p(), 1, rng)) return std::nullopt;
  if (plugin == nullptr) return absl::InternalError("a plugin op run without the instance its check made");
  absl::StatusOr<cv::Mat> out = plugin->Apply(image, rng, max_pixels, io);
  if (!out.ok()) return out.status();
  return *std::move(out);
}

// Without the server's user ops an entry cannot tell: random, as the
// materialiser must assume.
bool Unknown(const v1::Op&) { return true; }

const UserOpHooks kPythonHooks{
    [](absl::string_view name) { return name == "python"; }, ParseUserOp, UserOpText, CheckPython,
    [](const v1::Op&, const UserOps&) { return true; },      RunPython};
bool PluginFixesSize(const PluginInstance* plugin) {
  int height = 0, width = 0;
  return plugin != nullptr && plugin->OutputSize(&height, &width) == STOKER_SIZE_FIXED;
}

const UserOpHooks kPluginHooks{IsPluginOpName, ParseUserOp, UserOpText,     CheckPlugin,
                               PluginIsRandom, RunPlugin,   PluginFixesSize};

OpEntry UserEntry(v1::Op::OpCase op, const char* counterpart, const UserOpHooks* hooks) {
  // kRefused: a session with target fields cannot use them (Pipeline::Create says why).
  OpEntry e{op, counterpart, nullptr, Unknown, nullptr, OpTargets::kRefused};
  e.limit = nullptr;
  e.user = hooks;
  return e;
}

}  // namespace

const std::vector<OpEntry>& UserOpEntries() {
  static const auto* entries =
      new std::vector<OpEntry>{UserEntry(v1::Op::kPython, "a Python function of the operator's modules", &kPythonHooks),
                               UserEntry(v1::Op::kPlugin, "a C++ op plugin the server loaded", &kPluginHooks)};
  return *entries;
}

}  // namespace stoker
