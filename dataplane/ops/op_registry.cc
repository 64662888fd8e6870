#include "dataplane/ops/op_registry.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker {

// The declared ops' makers, one per line of declared/ops.inc (each defined
// in its own file there).
#define STOKER_DECLARED_OP(make) OpEntry make();
#include "dataplane/ops/declared/ops.inc"
#undef STOKER_DECLARED_OP

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

namespace {

// A numeric or bool field's value as a double (`index` < 0: a singular field).
double Value(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool one = index < 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return one ? r->GetInt32(m, f) : r->GetRepeatedInt32(m, f, index);
    case FieldDescriptor::CPPTYPE_INT64:
      return static_cast<double>(one ? r->GetInt64(m, f) : r->GetRepeatedInt64(m, f, index));
    case FieldDescriptor::CPPTYPE_UINT32: return one ? r->GetUInt32(m, f) : r->GetRepeatedUInt32(m, f, index);
    case FieldDescriptor::CPPTYPE_UINT64:
      return static_cast<double>(one ? r->GetUInt64(m, f) : r->GetRepeatedUInt64(m, f, index));
    case FieldDescriptor::CPPTYPE_FLOAT: return one ? r->GetFloat(m, f) : r->GetRepeatedFloat(m, f, index);
    case FieldDescriptor::CPPTYPE_DOUBLE: return one ? r->GetDouble(m, f) : r->GetRepeatedDouble(m, f, index);
    case FieldDescriptor::CPPTYPE_BOOL: return (one ? r->GetBool(m, f) : r->GetRepeatedBool(m, f, index)) ? 1 : 0;
    default: return std::nan("");
  }
}

void SetValue(Message& m, const FieldDescriptor* f, double v) {
  const Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(&m, f, static_cast<int32_t>(v)); break;
    case FieldDescriptor::CPPTYPE_INT64: r->SetInt64(&m, f, static_cast<int64_t>(v)); break;
    case FieldDescriptor::CPPTYPE_UINT32: r->SetUInt32(&m, f, static_cast<uint32_t>(v)); break;
    case FieldDescriptor::CPPTYPE_UINT64: r->SetUInt64(&m, f, static_cast<uint64_t>(v)); break;
    case FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(&m, f, static_cast<float>(v)); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(&m, f, v); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(&m, f, v != 0); break;
    default: break;
  }
}

// A value as the messages write it: an integer field's as an integer, a
// float's (or a declared op's, `f` null) as %g.
std::string Written(const FieldDescriptor* f, double v) {
  if (f == nullptr) return absl::StrFormat("%g", v);
  const bool integer =
      f->cpp_type() != FieldDescriptor::CPPTYPE_FLOAT && f->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE;
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_UINT32 || f->cpp_type() == FieldDescriptor::CPPTYPE_UINT64) {
    return absl::StrFormat("%.0f", v);  // no cast: a uint64 may not fit an int64
  }
  return integer ? absl::StrCat(static_cast<int64_t>(v)) : absl::StrFormat("%g", v);
}

// The message for a value `v` of the parameter `param` (at `at`) outside its
// range: "AT = V; allowed range is R", or for a repeated field "AT has V;
// each in R". `f`: the message field (null: a declared op's value).
absl::Status OutOfRange(const std::string& at, const FieldDescriptor* f, double v, const OpParam& param) {
  if (f != nullptr && f->is_repeated()) {
    return absl::InvalidArgumentError(absl::StrCat(at, " has ", Written(f, v), "; each in ", ParamRange(param)));
  }
  return absl::InvalidArgumentError(absl::StrCat(at, " = ", Written(f, v), "; allowed range is ", ParamRange(param)));
}

// Whether `v` is in the declared range or is the default (a float field's
// bounds compared as floats: 0.01 is the float nearest it).
bool Allowed(const FieldDescriptor* f, double v, const OpParam& param) {
  double lo = param.lo, hi = param.hi, fallback = param.fallback;
  if (f != nullptr && f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
    lo = static_cast<float>(lo), hi = static_cast<float>(hi), fallback = static_cast<float>(fallback);
  }
  return ((param.above_lo ? v > lo : v >= lo) && v <= hi) || v == fallback;
}

// CheckOp for a declared op (OpEntry::name): its values, one per declared
// parameter (absent or NaN: the default, which a parameter without one
// requires), then the entry's own check, then the ranges.
absl::Status CheckDeclared(const OpEntry& entry, const std::string& where, v1::Op& op, OpShape* shape) {
  v1::DeclaredOp& d = *op.mutable_declared();
  const std::string at = absl::StrCat(where, ".", entry.name);
  const int count = static_cast<int>(entry.params.size());
  if (d.values_size() > count) {
    return absl::InvalidArgumentError(absl::StrCat(at, " has ", d.values_size(), " values; it takes ", count));
  }
  while (d.values_size() < count) d.add_values(std::nan(""));
  for (int i = 0; i < count; ++i) {
    if (!std::isnan(d.values(i))) continue;
    if (std::isnan(entry.params[i].fallback)) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".", entry.params[i].field, " is required"));
    }
    d.set_values(i, entry.params[i].fallback);
  }
  for (int i = 0; i < count; ++i) {  // the types, before the entry's check compares values
    const OpParam& param = entry.params[i];
    if (!HasParamType(param, d.values(i))) {
      return absl::InvalidArgumentError(absl::StrFormat("%s.%s = %g is not an integer; allowed range is %s", at,
                                                        param.field, d.values(i), ParamRange(param)));
    }
  }
  if (entry.check != nullptr) {
    if (absl::Status s = entry.check(where, op, shape); !s.ok()) return s;
  }
  for (int i = 0; i < count; ++i) {
    const OpParam& param = entry.params[i];
    if (!Allowed(nullptr, d.values(i), param)) {
      return OutOfRange(absl::StrCat(at, ".", param.field), nullptr, d.values(i), param);
    }
  }
  return absl::OkStatus();
}

// The declared field's descriptor in the op's message `m` (of the op
// `which`), or INTERNAL for a declaration that names no numeric field of it
// (op_params_test.cc checks every entry's).
absl::StatusOr<const FieldDescriptor*> Field(const FieldDescriptor* which, const Message& m, const OpParam& param) {
  const FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(param.field);
  if (f == nullptr || f->cpp_type() == FieldDescriptor::CPPTYPE_ENUM ||
      f->cpp_type() == FieldDescriptor::CPPTYPE_STRING || f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    return absl::InternalError(absl::StrCat(which->name(), " declares a parameter '", param.field,
                                            "' that is not a numeric field of its message"));
  }
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_BOOL && !f->has_presence() && !std::isnan(param.fallback)) {
    // Its 0 would read as unset: it could never be turned off.
    return absl::InternalError(
        absl::StrCat(which->name(), " declares a default for '", param.field, "', a bool that is not optional"));
  }
  return f;
}

}  // namespace

bool MakesFloats(const v1::Op& op) {
  const OpEntry* entry = FindOp(op);
  return entry != nullptr && entry->rules.float_why != nullptr;
}

bool HasParamType(const OpParam& param, double value) {
  return param.type != OpParam::kInteger || value == std::trunc(value);
}

std::string ParamRange(const OpParam& param) {
  std::string out =
      param.above_lo ? absl::StrFormat("(%g, %g]", param.lo, param.hi) : absl::StrFormat("%g..%g", param.lo, param.hi);
  if (*param.unit != '\0') absl::StrAppend(&out, " ", param.unit);
  return out;
}

absl::Status CheckOp(const OpEntry& entry, const std::string& where, v1::Op& op, OpShape* shape) {
  const FieldDescriptor* which = v1::Op::descriptor()->FindFieldByNumber(op.op_case());
  if (which == nullptr || op.op_case() != entry.op || (entry.name != nullptr && op.declared().name() != entry.name)) {
    return absl::InternalError(absl::StrCat(where, ": not an op of this entry"));
  }
  if (entry.user != nullptr) {  // its hooks check it, with the server's user ops (UserOpHooks::check)
    return absl::InternalError(absl::StrCat(where, ": a user op is checked by its hooks, not CheckOp"));
  }
  if (entry.name != nullptr) return CheckDeclared(entry, where, op, shape);
  Message& m = *op.GetReflection()->MutableMessage(&op, which);
  const Reflection& r = *m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  for (const OpParam& param : entry.params) {
    absl::StatusOr<const FieldDescriptor*> f = Field(which, m, param);
    if (!f.ok()) return f.status();
    fields.push_back(*f);
    if (std::isnan(param.fallback) || (*f)->is_repeated()) continue;
    const bool unset = (*f)->has_presence() ? !r.HasField(m, *f) : Value(m, *f, -1) == 0;
    if (unset) SetValue(m, *f, param.fallback);
  }
  if (entry.check != nullptr) {
    if (absl::Status s = entry.check(where, op, shape); !s.ok()) return s;
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    const OpParam& param = entry.params[i];
    const FieldDescriptor* f = fields[i];
    const bool repeated = f->is_repeated();
    if (!repeated && f->has_presence() && !r.HasField(m, f)) continue;  // unset, no default: the op's own
    // Each value of a repeated field; j = -1: a singular field's one value.
    for (int j = repeated ? 0 : -1; j < (repeated ? r.FieldSize(m, f) : 0); ++j) {
      const double v = Value(m, f, j);
      if (Allowed(f, v, param)) continue;
      return OutOfRange(absl::StrCat(where, ".", which->name(), ".", f->name()), f, v, param);
    }
  }
  return absl::OkStatus();
}

const OpEntry* FindOp(v1::Op::OpCase op) {
  static const auto* table = [] {
    auto* t = new std::map<v1::Op::OpCase, OpEntry>();
    for (const auto* family :
         {&CoreOps(), &MediaOps(), &PhotometricOps(), &ErasingOps(), &GeometricOps(), &PolicyOps(), &UserOpEntries()}) {
      for (const OpEntry& e : *family) t->emplace(e.op, e);
    }
    return t;
  }();
  auto it = table->find(op);
  return it == table->end() ? nullptr : &it->second;
}

const std::vector<OpEntry>& DeclaredOps() {
  static const auto* table = new std::vector<OpEntry>{
#define STOKER_DECLARED_OP(make) make(),
#include "dataplane/ops/declared/ops.inc"
#undef STOKER_DECLARED_OP
  };
  return *table;
}

const OpEntry* FindDeclaredOp(absl::string_view name) {
  for (const OpEntry& e : DeclaredOps()) {
    if (name == e.name) return &e;
  }
  return nullptr;
}

bool IsUserOp(const v1::Op& op) {
  const OpEntry* entry = FindOp(op);
  return entry != nullptr && entry->user != nullptr;
}

const OpEntry* FindOp(const v1::Op& op) {
  return op.op_case() == v1::Op::kDeclared ? FindDeclaredOp(op.declared().name()) : FindOp(op.op_case());
}

absl::Status CheckOpBody(v1::Op::OpCase which, const std::string& where, google::protobuf::Message& body) {
  const OpEntry* entry = FindOp(which);
  const google::protobuf::FieldDescriptor* field = v1::Op::descriptor()->FindFieldByNumber(which);
  if (entry == nullptr || field == nullptr || field->message_type() != body.GetDescriptor()) {
    return absl::InternalError(absl::StrCat(where, ": not the message of a registered op"));
  }
  v1::Op op;
  google::protobuf::Message* m = op.GetReflection()->MutableMessage(&op, field);
  m->GetReflection()->Swap(m, &body);
  OpShape shape;
  absl::Status s = CheckOp(*entry, where, op, &shape);
  m->GetReflection()->Swap(m, &body);
  return s;
}

bool StartsWithCrop(const std::vector<v1::Op>& pipeline) {
  const OpEntry* first = pipeline.empty() ? nullptr : FindOp(pipeline[0]);
  return first != nullptr && first->fused.region;
}

}  // namespace stoker
