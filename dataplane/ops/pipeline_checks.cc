// One op of a pipeline checked and completed with its defaults by its entry
// in the op registry (op_registry.h; a user op's by its UserOpHooks, with the
// server's Python stage and plugins): what Pipeline::Create runs on each op.
#include "dataplane/ops/pipeline_checks.h"

#include <string>
#include <vector>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "dataplane/ops/op_registry.h"

namespace stoker {

absl::Status Misplaced(const std::string& subject, absl::string_view suffix, const OpRules& rules) {
  return absl::InvalidArgumentError(
      absl::StrCat(subject, " must be the ", rules.place == OpRules::kFirst ? "first" : "last", " op", suffix,
                   rules.place_why != nullptr ? ": " : "", rules.place_why != nullptr ? rules.place_why : ""));
}

absl::Status CheckPipelineOp(const std::string& where, size_t position, v1::Op& op, bool& fixed, int& h, int& w,
                             const UserOps& user, std::shared_ptr<const PluginInstance>* plugin,
                             const OpEntry** found) {
  if (op.op_case() == v1::Op::OP_NOT_SET) return absl::InvalidArgumentError(absl::StrCat(where, " has no op set"));
  const OpEntry* entry = FindOp(op);                            // op_registry.h
  if (entry == nullptr && op.op_case() != v1::Op::kDeclared) {  // never: every other case has an entry
    return absl::InternalError(absl::StrCat(where, ": op ", op.op_case(), " has no entry in the op registry"));
  }
  if (entry == nullptr) {  // a declared op this build does not have
    std::vector<std::string> names;
    for (const OpEntry& e : DeclaredOps()) names.push_back(e.name);
    return absl::InvalidArgumentError(absl::StrCat(where, ": unknown op '", op.declared().name(),
                                                   "'; this server's declared ops: ", absl::StrJoin(names, ", ")));
  }
  if (entry->rules.place == OpRules::kFirst && position != 0) {  // before its own checks (OpRules)
    return Misplaced(absl::StrCat(where, ".", OpName(*entry, op)), "", entry->rules);
  }
  OpShape shape{fixed, h, w};
  absl::Status s =
      entry->user != nullptr ? entry->user->check(where, op, &shape, user, plugin) : CheckOp(*entry, where, op, &shape);
  fixed = shape.fixed;
  h = shape.height;
  w = shape.width;
  *found = entry;
  return s;
}

}  // namespace stoker
