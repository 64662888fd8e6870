// What pipeline_text.cc knows of each op, for PipelineGrammar
// (pipeline_grammar.cc); not for other users.
#ifndef STOKER_COMMON_PIPELINE_TEXT_INTERNAL_H_
#define STOKER_COMMON_PIPELINE_TEXT_INTERNAL_H_

#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"

namespace stoker {

// An argument of a reflected op: `field`, or the range field..max.
struct TextParam {
  std::string name;
  const google::protobuf::FieldDescriptor* field = nullptr;
  const google::protobuf::FieldDescriptor* max = nullptr;
};
// The arguments the text form reads for an op message, in positional order.
std::vector<TextParam> ReflectedParams(const google::protobuf::Descriptor* d);
// A built-in op's argument names in positional order; null for other ops.
const std::vector<std::string>* BuiltInParams(const std::string& op);

}  // namespace stoker

#endif  // STOKER_COMMON_PIPELINE_TEXT_INTERNAL_H_
