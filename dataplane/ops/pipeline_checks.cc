// One op of a pipeline checked and completed with its defaults (the user ops
// here, by their Python stage or plugin; every other op by its entry in the
// op registry, op_registry.h): what Pipeline::Create runs on each op.
#include "dataplane/ops/pipeline_checks.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dataplane/ops/op_plugins.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/ops/python_stage.h"

namespace stoker {

namespace {

// A plugin op: the plugin checks its arguments (making the instance the
// pipeline keeps, *plugin); its output size.
absl::Status CheckPluginOp(const std::string& where, v1::Op& op, bool& fixed, int& h, int& w, const UserOps& user,
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
      fixed = true;
      h = oh;
      w = ow;
      break;
    case STOKER_SIZE_VARIES: fixed = false; break;
    default: break;
  }
  return absl::OkStatus();
}

}  // namespace

bool PluginOpIsRandom(const v1::Op& op, const UserOps& user) {
  const StokerOpInfo* info = user.plugins ? user.plugins->Find(op.plugin().name()) : nullptr;
  return info == nullptr || info->random != 0 || (op.plugin().has_p() && op.plugin().p() < 1);
}

absl::Status CheckPipelineOp(const std::string& where, v1::Op& op, bool& fixed, int& h, int& w, const UserOps& user,
                             std::shared_ptr<const PluginInstance>* plugin) {
  switch (op.op_case()) {
    case v1::Op::kPython:
      if (user.python == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " ", PipelineToText({op}),
            ": this server runs no Python transforms (the operator starts it with --python-transforms MODULES)"));
      }
      return user.python->Check(where, op.python());  // the size stays as it was (checked when it runs)
    case v1::Op::kPlugin: return CheckPluginOp(where, op, fixed, h, w, user, plugin);
    case v1::Op::OP_NOT_SET: break;
    case v1::Op::kDeclared:
      if (FindOp(op) == nullptr) {
        std::vector<std::string> names;
        for (const OpEntry& e : DeclaredOps()) names.push_back(e.name);
        return absl::InvalidArgumentError(absl::StrCat(where, ": unknown op '", op.declared().name(),
                                                       "'; this server's declared ops: ", absl::StrJoin(names, ", ")));
      }
      [[fallthrough]];
    default:
      if (const OpEntry* entry = FindOp(op)) {  // op_registry.h
        OpShape shape{fixed, h, w};
        absl::Status s = CheckOp(*entry, where, op, &shape);
        fixed = shape.fixed;
        h = shape.height;
        w = shape.width;
        return s;
      }
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(where, " has no op set"));
}

}  // namespace stoker
