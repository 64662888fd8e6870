// PipelineGrammar (pipeline_text.h): the text form's ops, their arguments
// (each op's OpText in the op registry) and their kinds (stoker.proto's
// descriptors), for the reference generated from the code.
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/ops/pipeline_text_internal.h"

namespace stoker {

using google::protobuf::FieldDescriptor;

namespace {

std::string KindOf(const FieldDescriptor* f) {
  std::string kind;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_FLOAT:
    case FieldDescriptor::CPPTYPE_DOUBLE: kind = "float"; break;
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64: kind = "int"; break;
    case FieldDescriptor::CPPTYPE_BOOL: kind = "bool"; break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      std::vector<std::string> names;
      for (int i = 0; i < f->enum_type()->value_count(); ++i) {
        names.push_back(absl::AsciiStrToLower(f->enum_type()->value(i)->name()));
      }
      kind = absl::StrJoin(names, "|");
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: kind = "string"; break;
    default: kind = "message";
  }
  return f->is_repeated() ? kind + " list" : kind;
}

OpGrammar::Argument ArgumentOf(const TextParam& p) {
  if (p.max != nullptr) return {p.name, "lo:hi (" + KindOf(p.field) + ")", {p.field->name(), p.max->name()}};
  return {p.name, KindOf(p.field), {p.field->name()}};
}

}  // namespace

std::vector<OpGrammar> PipelineGrammar() {
  std::vector<OpGrammar> out;
  const google::protobuf::Descriptor* op = v1::Op::descriptor();
  for (int i = 0; i < op->field_count(); ++i) {
    const FieldDescriptor* which = op->field(i);
    if (which->containing_oneof() == nullptr || which->message_type() == nullptr) continue;
    const OpEntry* entry = FindOp(static_cast<v1::Op::OpCase>(which->number()));
    if (!NamedByField(which) || entry->user != nullptr) continue;  // carriers and user ops: their own grammars
    OpGrammar g{which->name(), which->message_type()->name(), {}};
    for (const TextParam& p : OpParams(which)) g.arguments.push_back(ArgumentOf(p));
    out.push_back(std::move(g));
  }
  for (const OpEntry& e : DeclaredOps()) {  // their arguments are their declared parameters
    OpGrammar g{e.name, "DeclaredOp", {}};
    for (const OpParam& p : e.params) {
      g.arguments.push_back({p.field, p.type == OpParam::kInteger ? "int" : "float", {p.field}});
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace stoker
