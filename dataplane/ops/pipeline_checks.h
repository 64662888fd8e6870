// Checks of a pipeline's ops, shared by Pipeline::Create and
// Pipeline::CheckOpAt (pipeline_checks.cc).
#ifndef STOKER_DATAPLANE_OPS_PIPELINE_CHECKS_H_
#define STOKER_DATAPLANE_OPS_PIPELINE_CHECKS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/user_ops/op_plugins.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// Fills defaults and validates one op, the `position`th of its pipeline;
// INVALID_ARGUMENT names `where` and the allowed range. An op whose entry
// allows it only first is refused elsewhere before its own checks. `fixed`
// tells whether the output size (h x w) is fixed after this op; a plugin
// op's instance goes to *plugin, and the op's registry entry to *entry (for
// the pipeline to keep: found once).
// The error for an op its entry's place rule (OpRules: only first, only
// last) refuses where it stands: "SUBJECT must be the first op SUFFIX: WHY"
// (`subject` names the op, `suffix` the sequence, e.g. " of the prefix").
absl::Status Misplaced(const std::string& subject, absl::string_view suffix, const OpRules& rules);

absl::Status CheckPipelineOp(const std::string& where, size_t position, v1::Op& op, bool& fixed, int& h, int& w,
                             const UserOps& user, std::shared_ptr<const PluginInstance>* plugin, const OpEntry** entry);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_PIPELINE_CHECKS_H_
