// What the parts of the text form share (pipeline_text.cc: the registered
// ops; pipeline_text_user_ops.cc: python and plugin ops; pipeline_grammar.cc:
// the grammar for the generated reference); not for other users.
#ifndef STOKER_DATAPLANE_OPS_PIPELINE_TEXT_INTERNAL_H_
#define STOKER_DATAPLANE_OPS_PIPELINE_TEXT_INTERNAL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// An argument of a registered op: `field`, or the range field..max.
struct TextParam {
  std::string name;
  const google::protobuf::FieldDescriptor* field = nullptr;
  const google::protobuf::FieldDescriptor* max = nullptr;
};
// The arguments the text form reads for the op `which` (a field of v1::Op),
// in positional order: its OpText's (op_registry.h), else its message's.
std::vector<TextParam> OpParams(const google::protobuf::FieldDescriptor* which);

// Whether the text form names the op of `which` (a field of v1::Op) by the
// field's own name: a registered op, or python. Not the carriers, whose ops
// go by other names: declared (each by its entry's) and plugin (team.op).
bool NamedByField(const google::protobuf::FieldDescriptor* which);

absl::StatusOr<float> ParseFloat(absl::string_view v);
// The shortest %g form (6, 9 digits) that reads back as the same float.
std::string FloatText(float f);
std::string DoubleText(double d);

// python(...) and plugin ops: `open` is the position of '(' in `text`, or npos.
absl::StatusOr<v1::Op> ParseUserOp(const std::string& name, absl::string_view text, size_t open);
std::string UserOpText(const v1::Op& op);
// A plugin op's name: lower-case words joined by one dot or more ("team.op").
bool IsPluginOpName(absl::string_view name);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_PIPELINE_TEXT_INTERNAL_H_
