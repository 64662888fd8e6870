// Text form of a pipeline spec, as typed on command lines, e.g.
//   "random_resized_crop(224, scale=0.08:1, ratio=0.75:1.3333), random_horizontal_flip(0.5)"
// Ops are separated by commas outside parentheses; arguments are positional
// (in each op's order: its OpText in the op registry, op_registry.h, by
// default its stoker.proto message's fields) or name=value; ranges are lo:hi.
// Pure functions; thread-safe.
#ifndef STOKER_DATAPLANE_OPS_PIPELINE_TEXT_H_
#define STOKER_DATAPLANE_OPS_PIPELINE_TEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// The standard ImageNet training transform: RandomResizedCrop(224) and
// RandomHorizontalFlip(0.5).
constexpr absl::string_view kDefaultTrainPipeline = "random_resized_crop(224), random_horizontal_flip(0.5)";

// INVALID_ARGUMENT naming the op or argument that does not parse. Values are
// not range-checked here; the server validates them.
absl::StatusOr<std::vector<v1::Op>> ParsePipelineText(absl::string_view text);

// The inverse of ParsePipelineText, for logs and reports.
std::string PipelineToText(const std::vector<v1::Op>& ops);

// One op of the text form as ParsePipelineText reads it, for the reference
// generated from the code (docs/reference/pipeline.md): its name (the Op
// field), its message, and its arguments in positional order, each with its
// kind ("int", "float", "bool", "lo:hi (float)", "float list", "a|b|...")
// and the message fields it sets.
struct OpGrammar {
  struct Argument {
    std::string name;
    std::string kind;
    std::vector<std::string> fields;
  };
  std::string name;
  std::string message;
  std::vector<Argument> arguments;
};
// Every op but the user ops (python(...) and plugin ops), in stoker.proto's order, then the declared ops (message
// "DeclaredOp").
std::vector<OpGrammar> PipelineGrammar();

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_PIPELINE_TEXT_H_
