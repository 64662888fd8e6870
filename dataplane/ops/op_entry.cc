#include "dataplane/ops/op_entry.h"

#include <cmath>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace stoker {

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
// float's as %g.
std::string Written(const FieldDescriptor* f, double v) {
  const bool integer =
      f->cpp_type() != FieldDescriptor::CPPTYPE_FLOAT && f->cpp_type() != FieldDescriptor::CPPTYPE_DOUBLE;
  return integer ? absl::StrCat(static_cast<int64_t>(v)) : absl::StrFormat("%g", v);
}

// Whether `v` is in the declared range or is the default (a float field's
// bounds compared as floats: 0.01 is the float nearest it).
bool Allowed(const FieldDescriptor* f, double v, const OpParam& param) {
  double lo = param.lo, hi = param.hi, fallback = param.fallback;
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT) {
    lo = static_cast<float>(lo), hi = static_cast<float>(hi), fallback = static_cast<float>(fallback);
  }
  return ((param.above_lo ? v > lo : v >= lo) && v <= hi) || v == fallback;
}

// The op's message and the declared field's descriptor, or INTERNAL for a
// declaration that names no numeric field of it (op_params_test.cc checks
// every entry's).
absl::StatusOr<std::pair<Message*, const FieldDescriptor*>> Field(v1::Op& op, const OpParam& param) {
  const FieldDescriptor* which = v1::Op::descriptor()->FindFieldByNumber(op.op_case());
  if (which == nullptr) return absl::InternalError("an op with no message set");
  Message* m = op.GetReflection()->MutableMessage(&op, which);
  const FieldDescriptor* f = m->GetDescriptor()->FindFieldByName(param.field);
  if (f == nullptr || f->cpp_type() == FieldDescriptor::CPPTYPE_ENUM ||
      f->cpp_type() == FieldDescriptor::CPPTYPE_STRING || f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    return absl::InternalError(absl::StrCat(which->name(), " declares a parameter '", param.field,
                                            "' that is not a numeric field of its message"));
  }
  return std::make_pair(m, f);
}

}  // namespace

std::string ParamRange(const OpParam& param) {
  std::string out =
      param.above_lo ? absl::StrFormat("(%g, %g]", param.lo, param.hi) : absl::StrFormat("%g..%g", param.lo, param.hi);
  if (*param.unit != '\0') absl::StrAppend(&out, " ", param.unit);
  return out;
}

OpEntry WithParams(std::vector<OpParam> params, OpEntry entry) {
  entry.params = std::move(params);
  return entry;
}

OpEntry SetsSize(OpEntry entry) {
  entry.sets_size = true;
  return entry;
}

OpEntry Storable(int64_t (*pixels)(const v1::Op& op, int64_t pixels), OpEntry entry) {
  entry.storable = true;
  entry.pixels = pixels;
  return entry;
}

absl::Status CheckOp(const OpEntry& entry, const std::string& where, v1::Op& op, OpShape* shape) {
  std::vector<std::pair<Message*, const FieldDescriptor*>> fields;
  for (const OpParam& param : entry.params) {
    auto field = Field(op, param);
    if (!field.ok()) return field.status();
    fields.push_back(*field);
    auto [m, f] = *field;
    if (std::isnan(param.fallback) || f->is_repeated()) continue;
    const bool unset = f->has_presence() ? !m->GetReflection()->HasField(*m, f) : Value(*m, f, -1) == 0;
    if (unset) SetValue(*m, f, param.fallback);
  }
  if (entry.check != nullptr) {
    if (absl::Status s = entry.check(where, op, shape); !s.ok()) return s;
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    const OpParam& param = entry.params[i];
    auto [m, f] = fields[i];
    const std::string at =
        absl::StrCat(where, ".", v1::Op::descriptor()->FindFieldByNumber(op.op_case())->name(), ".", f->name());
    if (f->is_repeated()) {
      for (int j = 0; j < m->GetReflection()->FieldSize(*m, f); ++j) {
        const double v = Value(*m, f, j);
        if (!Allowed(f, v, param)) {
          return absl::InvalidArgumentError(absl::StrCat(at, " has ", Written(f, v), "; each in ", ParamRange(param)));
        }
      }
      continue;
    }
    if (f->has_presence() && !m->GetReflection()->HasField(*m, f)) continue;  // unset, no default: the op's own
    const double v = Value(*m, f, -1);
    if (!Allowed(f, v, param)) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, " = ", Written(f, v), "; allowed range is ", ParamRange(param)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckProbability(const std::string& where, bool has_p, float p) {
  if (has_p && !(p >= 0 && p <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.p = %g; allowed range is 0..1", where, p));
  }
  return absl::OkStatus();
}

absl::Status CheckFill(const std::string& where, const google::protobuf::RepeatedField<float>& fill) {
  if (fill.size() != 0 && fill.size() != 1 && fill.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.fill has %d values; give 1 or 3 (R:G:B)", where, fill.size()));
  }
  for (float v : fill) {
    if (!(v >= 0 && v <= 255))
      return absl::InvalidArgumentError(absl::StrFormat("%s.fill has %g; each in 0..255", where, v));
  }
  return absl::OkStatus();
}

std::optional<cv::Scalar> FillColour(const google::protobuf::RepeatedField<float>& fill) {
  if (fill.empty()) return std::nullopt;
  if (fill.size() == 1) return cv::Scalar::all(std::nearbyint(fill[0]));
  return cv::Scalar(std::nearbyint(fill[0]), std::nearbyint(fill[1]), std::nearbyint(fill[2]));
}

absl::Status CheckWarpInterpolation(const std::string& where, bool has, v1::Interpolation interpolation) {
  if (has && interpolation == v1::BICUBIC) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".interpolation = bicubic; warps take nearest or bilinear"));
  }
  return absl::OkStatus();
}

bool PassesGate(bool has_p, float p, float otherwise, Rng& rng) {
  const float q = has_p ? p : otherwise;
  if (q >= 1) return true;
  return rng.UniformDouble() < q;
}

}  // namespace stoker
