// PipelineGrammar (pipeline_text.h): the text form's ops, their arguments
// and kinds, read from stoker.proto's descriptors and the built-in ops'
// syntax, for the reference generated from the code.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "common/pipeline_text.h"
#include "common/pipeline_text_internal.h"

namespace stoker {

using google::protobuf::FieldDescriptor;

namespace {

std::string KindOf(const FieldDescriptor* f) {
  std::string kind;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_FLOAT:
    case FieldDescriptor::CPPTYPE_DOUBLE:
      kind = "float";
      break;
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
      kind = "int";
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      kind = "bool";
      break;
    case FieldDescriptor::CPPTYPE_ENUM: {
      std::vector<std::string> names;
      for (int i = 0; i < f->enum_type()->value_count(); ++i) {
        names.push_back(absl::AsciiStrToLower(f->enum_type()->value(i)->name()));
      }
      kind = absl::StrJoin(names, "|");
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING:
      kind = "string";
      break;
    default:
      kind = "message";
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
    const std::string& name = which->name();
    if (name == "python" || name == "plugin") continue;
    const google::protobuf::Descriptor* d = which->message_type();
    OpGrammar g{name, d->name(), {}};
    const std::vector<TextParam> params = ReflectedParams(d);
    const std::vector<std::string>* built_in = BuiltInParams(name);
    if (built_in == nullptr) {
      for (const TextParam& p : params) g.arguments.push_back(ArgumentOf(p));
    } else {  // a built-in op: its own order and names; kinds where a field of the name exists
      for (const std::string& arg : *built_in) {
        auto same = std::find_if(params.begin(), params.end(), [&](const TextParam& p) { return p.name == arg; });
        g.arguments.push_back(same != params.end() ? ArgumentOf(*same) : OpGrammar::Argument{arg, "", {}});
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace stoker
