// The text form of the ops (python and plugin ops: their own, below),
// read and printed by each op's OpText in the op registry (op_registry.h):
// its arguments in positional order, each one field of its stoker.proto
// message or a range of two; a declared op's are its declared parameters.
// User ops: pipeline_text_user_ops.cc, through their entries' hooks.
#include "dataplane/ops/pipeline_text.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text_internal.h"

namespace stoker {

using google::protobuf::FieldDescriptor;

namespace {

absl::StatusOr<int32_t> ParseInt(absl::string_view v) {
  int32_t i;
  if (!absl::SimpleAtoi(v, &i)) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not an integer"));
  return i;
}

absl::StatusOr<std::pair<float, float>> ParseRange(absl::string_view v) {
  std::vector<absl::string_view> parts = absl::StrSplit(v, ':');
  if (parts.size() != 2) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a range lo:hi"));
  auto lo = ParseFloat(parts[0]);
  auto hi = ParseFloat(parts[1]);
  if (!lo.ok()) return lo.status();
  if (!hi.ok()) return hi.status();
  return std::make_pair(*lo, *hi);
}

absl::StatusOr<bool> ParseBool(absl::string_view v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not true or false"));
}

// The op field of v1::Op named `name` (e.g. "random_resized_crop").
const FieldDescriptor* OpField(absl::string_view name) {
  const FieldDescriptor* f = v1::Op::descriptor()->FindFieldByName(std::string(name));
  if (f == nullptr || f->containing_oneof() == nullptr || f->message_type() == nullptr) return nullptr;
  return f;
}

const OpText& TextOf(const FieldDescriptor* which) {
  static const OpText kFromTheMessage;
  const OpEntry* entry = FindOp(static_cast<v1::Op::OpCase>(which->number()));
  return entry != nullptr ? entry->text : kFromTheMessage;
}

// The message's fields in declaration order; a pair NAME_min, NAME_max is
// one argument NAME=lo:hi.
std::vector<TextParam> MessageParams(const google::protobuf::Descriptor* d) {
  std::vector<TextParam> params;
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string& n = f->name();
    if (absl::EndsWith(n, "_max") && d->FindFieldByName(n.substr(0, n.size() - 4) + "_min") != nullptr) continue;
    if (absl::EndsWith(n, "_min")) {
      if (const FieldDescriptor* max = d->FindFieldByName(n.substr(0, n.size() - 4) + "_max")) {
        params.push_back({n.substr(0, n.size() - 4), f, max});
        continue;
      }
    }
    params.push_back({n, f, nullptr});
  }
  return params;
}

absl::Status SetScalar(absl::string_view v, const FieldDescriptor* f, google::protobuf::Message* m) {
  const google::protobuf::Reflection* r = m->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_FLOAT: {
      auto x = ParseFloat(v);
      if (x.ok()) f->is_repeated() ? r->AddFloat(m, f, *x) : r->SetFloat(m, f, *x);
      return x.status();
    }
    case FieldDescriptor::CPPTYPE_INT32: {
      auto x = ParseInt(v);
      if (x.ok()) f->is_repeated() ? r->AddInt32(m, f, *x) : r->SetInt32(m, f, *x);
      return x.status();
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      auto x = ParseBool(v);
      if (x.ok()) r->SetBool(m, f, *x);
      return x.status();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* value = f->enum_type()->FindValueByName(absl::AsciiStrToUpper(v));
      if (value == nullptr) {
        std::vector<std::string> names;
        for (int i = 0; i < f->enum_type()->value_count(); ++i) {
          names.push_back(absl::AsciiStrToLower(f->enum_type()->value(i)->name()));
        }
        return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not one of ", absl::StrJoin(names, ", ")));
      }
      r->SetEnum(m, f, value);
      return absl::OkStatus();
    }
    default: return absl::InvalidArgumentError("an argument of a type the text form does not have");
  }
}

absl::Status SetParam(absl::string_view v, const TextParam& p, google::protobuf::Message* m) {
  if (p.max != nullptr) {
    auto range = ParseRange(v);
    if (!range.ok()) return range.status();
    m->GetReflection()->SetFloat(m, p.field, range->first);
    m->GetReflection()->SetFloat(m, p.max, range->second);
    return absl::OkStatus();
  }
  if (p.field->is_repeated()) {
    m->GetReflection()->ClearField(m, p.field);
    for (absl::string_view part : absl::StrSplit(v, ':')) {
      if (absl::Status s = SetScalar(part, p.field, m); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return SetScalar(v, p.field, m);
}

// The shortest %g form (6, 9, ... digits) that reads back as the same float
// or double; %.9g / %.17g always do.
template <typename T>
std::string ShortestText(T f) {
  constexpr int kMost = std::is_same_v<T, float> ? 9 : 17;
  for (int digits = 6; digits < kMost; digits += 3) {
    const std::string text = absl::StrFormat("%.*g", digits, f);
    T back = 0;
    bool parsed;
    if constexpr (std::is_same_v<T, float>) {
      parsed = absl::SimpleAtof(text, &back);
    } else {
      parsed = absl::SimpleAtod(text, &back);
    }
    if (parsed && back == f) return text;
  }
  return absl::StrFormat("%.*g", kMost, f);
}

// A value as text. The first ops' style: %g for a float, and absl's
// six-digit form for a float in a list (what their hand-written printer
// did; the same but for a NaN's sign), an enum value the message does not
// know as its first value's name.
std::string ScalarText(const google::protobuf::Message& m, const FieldDescriptor* f, int index, bool first_ops) {
  const google::protobuf::Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const float x = index < 0 ? r->GetFloat(m, f) : r->GetRepeatedFloat(m, f, index);
      if (!first_ops) return FloatText(x);
      return index < 0 ? absl::StrFormat("%g", x) : absl::StrCat(x);
    }
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(index < 0 ? r->GetInt32(m, f) : r->GetRepeatedInt32(m, f, index));
    case FieldDescriptor::CPPTYPE_BOOL: return r->GetBool(m, f) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM: {
      const google::protobuf::EnumValueDescriptor* v = f->enum_type()->FindValueByNumber(r->GetEnumValue(m, f));
      if (v == nullptr && first_ops) v = f->enum_type()->value(0);
      return v != nullptr ? absl::AsciiStrToLower(v->name()) : absl::StrCat(r->GetEnumValue(m, f));
    }
    default: return "?";
  }
}

// Whether a scalar field is set: present, or for the first ops' style
// (whose printer compared values) not 0 (-0.0 included).
bool IsSet(const google::protobuf::Message& m, const FieldDescriptor* f, bool first_ops) {
  const google::protobuf::Reflection* r = m.GetReflection();
  if (first_ops && f->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT && !f->has_presence()) return r->GetFloat(m, f) != 0;
  return r->HasField(m, f);
}

// NAME(bare, ..., arg=value, ...): the bare arguments always, the others
// when they are set.
std::string OpToText(const v1::Op& op, const FieldDescriptor* which) {
  const google::protobuf::Message& m = op.GetReflection()->GetMessage(op, which);
  const google::protobuf::Reflection* r = m.GetReflection();
  const OpText& style = TextOf(which);
  const bool first_ops = style.first_ops_style;
  std::vector<std::string> args;
  const std::vector<TextParam> params = OpParams(which);
  for (size_t i = 0; i < params.size(); ++i) {
    const TextParam& p = params[i];
    const bool bare = static_cast<int>(i) < style.bare;
    bool set;
    std::string value;
    if (p.max != nullptr) {
      set = IsSet(m, p.field, first_ops) || IsSet(m, p.max, first_ops);
      value = absl::StrCat(ScalarText(m, p.field, -1, first_ops), ":", ScalarText(m, p.max, -1, first_ops));
    } else if (p.field->is_repeated()) {
      std::vector<std::string> values;
      for (int k = 0; k < r->FieldSize(m, p.field); ++k) values.push_back(ScalarText(m, p.field, k, first_ops));
      set = !values.empty();
      value = absl::StrJoin(values, ":");
    } else {
      set = IsSet(m, p.field, first_ops);
      // The first ops' antialias is on unless turned off: it prints only when off.
      if (first_ops && p.field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) set = set && !r->GetBool(m, p.field);
      value = ScalarText(m, p.field, -1, first_ops);
    }
    if (bare) {
      args.push_back(value);
    } else if (set) {
      args.push_back(absl::StrCat(p.name, "=", value));
    }
  }
  return absl::StrCat(which->name(), "(", absl::StrJoin(args, ", "), ")");
}

// "; allowed range is LO..HI UNIT" when the op's entry declares the
// argument's field (OpParam), for a message about a value that did not read.
std::string DeclaredRange(const FieldDescriptor* which, const TextParam& param) {
  const OpEntry* entry = FindOp(static_cast<v1::Op::OpCase>(which->number()));
  if (entry == nullptr || param.field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) return "";
  for (const OpParam& p : entry->params) {
    if (p.field == param.field->name()) return absl::StrCat("; allowed range is ", ParamRange(p));
  }
  return "";
}

// The arguments of "NAME(a, b, key=c)" (`open`: the position of '(' in
// `text`, or npos: none): each one's parameter, by position or by its key
// among `names`, and its text.
absl::StatusOr<std::vector<std::pair<size_t, absl::string_view>>> SplitArguments(
    const std::string& name, absl::string_view text, size_t open, const std::vector<std::string>& names) {
  std::vector<std::pair<size_t, absl::string_view>> out;
  if (open == absl::string_view::npos) return out;
  if (text.back() != ')') {
    return absl::InvalidArgumentError(absl::StrCat("pipeline: op '", text, "' lacks a closing ')'"));
  }
  absl::string_view args = text.substr(open + 1, text.size() - open - 2);
  if (absl::StripAsciiWhitespace(args).empty()) return out;
  size_t position = 0;
  for (absl::string_view arg : absl::StrSplit(args, ',')) {
    arg = absl::StripAsciiWhitespace(arg);
    size_t index = position;
    absl::string_view value = arg;
    const size_t eq = arg.find('=');
    if (eq != absl::string_view::npos) {
      const absl::string_view key = absl::StripAsciiWhitespace(arg.substr(0, eq));
      value = absl::StripAsciiWhitespace(arg.substr(eq + 1));
      index = std::find(names.begin(), names.end(), key) - names.begin();
      if (index == names.size()) {
        return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, " has no argument '", key, "'; it takes ",
                                                       names.empty() ? "none" : absl::StrJoin(names, ", ")));
      }
    } else if (position >= names.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline: ", name, " takes at most ", names.size(), " arguments"));
    }
    ++position;
    out.emplace_back(index, value);
  }
  return out;
}

absl::StatusOr<v1::Op> ParseRegisteredOp(const std::string& name, absl::string_view text, size_t open,
                                         const FieldDescriptor* which) {
  v1::Op op;
  google::protobuf::Message* m = op.GetReflection()->MutableMessage(&op, which);  // set even with no arguments
  const std::vector<TextParam> params = OpParams(which);
  std::vector<std::string> names;
  for (const TextParam& p : params) names.push_back(p.name);
  auto args = SplitArguments(name, text, open, names);
  if (!args.ok()) return args.status();
  for (const auto& [index, value] : *args) {
    if (absl::Status s = SetParam(value, params[index], m); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, ".", params[index].name, ": ", s.message(),
                                                     DeclaredRange(which, params[index])));
    }
  }
  return op;
}

// A declared op (OpEntry::name): its values by position or by field, each
// a number; the others stay NaN, which CheckOp fills with their defaults.
absl::StatusOr<v1::Op> ParseDeclaredOp(const OpEntry& entry, absl::string_view text, size_t open) {
  std::vector<std::string> names;
  for (const OpParam& p : entry.params) names.push_back(p.field);
  auto args = SplitArguments(entry.name, text, open, names);
  if (!args.ok()) return args.status();
  std::vector<double> values(names.size(), std::nan(""));
  for (const auto& [index, value] : *args) {
    const bool integer = entry.params[index].type == OpParam::kInteger;
    if (!absl::SimpleAtod(value, &values[index]) || !std::isfinite(values[index]) ||
        !HasParamType(entry.params[index], values[index])) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline: ", entry.name, ".", names[index], ": '", value,
                                                     integer ? "' is not an integer" : "' is not a finite number",
                                                     "; allowed range is ", ParamRange(entry.params[index])));
    }
  }
  v1::Op op;
  op.mutable_declared()->set_name(entry.name);
  for (double v : values) op.mutable_declared()->add_values(v);
  return op;
}

// NAME(field=v, ...): a declared op's values that are set, by name.
std::string DeclaredOpText(const v1::DeclaredOp& d) {
  const OpEntry* entry = FindDeclaredOp(d.name());
  std::vector<std::string> args;
  for (int i = 0; i < d.values_size(); ++i) {
    if (std::isnan(d.values(i))) continue;
    const bool named = entry != nullptr && i < static_cast<int>(entry->params.size());
    args.push_back(
        absl::StrCat(named ? entry->params[i].field : absl::StrCat("value", i), "=", DoubleText(d.values(i))));
  }
  return absl::StrCat(d.name(), "(", absl::StrJoin(args, ", "), ")");
}

// Splits at commas that are not inside parentheses.
std::vector<std::string> SplitTopLevel(absl::string_view text) {
  std::vector<std::string> out(1);
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.emplace_back();
    } else {
      out.back().push_back(c);
    }
  }
  return out;
}

absl::StatusOr<v1::Op> ParseOp(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  const size_t open = text.find('(');
  std::string name(absl::StripAsciiWhitespace(text.substr(0, open)));
  for (const OpEntry& user : UserOpEntries()) {  // python(...), team.op(...): their own text form
    if (user.user->reads(name)) return user.user->parse(name, text, open);
  }
  if (const FieldDescriptor* which = OpField(name); which != nullptr && NamedByField(which)) {
    return ParseRegisteredOp(name, text, open, which);
  }
  if (const OpEntry* entry = FindDeclaredOp(name)) return ParseDeclaredOp(*entry, text, open);
  std::vector<std::string> known;
  for (int i = 0; i < v1::Op::descriptor()->field_count(); ++i) {
    const FieldDescriptor* which = v1::Op::descriptor()->field(i);
    if (NamedByField(which)) known.push_back(which->name());
  }
  for (const OpEntry& e : DeclaredOps()) known.push_back(e.name);
  std::sort(known.begin(), known.end());
  return absl::InvalidArgumentError(absl::StrCat("pipeline: unknown op '", name,
                                                 "'; known ops: ", absl::StrJoin(known, ", "),
                                                 " (and plugin ops the server loaded, named team.op)"));
}

}  // namespace

bool NamedByField(const FieldDescriptor* which) {
  const OpEntry* entry = FindOp(static_cast<v1::Op::OpCase>(which->number()));
  return entry != nullptr && (entry->user == nullptr || entry->user->reads(which->name()));
}

absl::StatusOr<std::vector<v1::Op>> ParsePipelineText(absl::string_view text) {
  std::vector<v1::Op> ops;
  if (absl::StripAsciiWhitespace(text).empty()) {
    return absl::InvalidArgumentError("pipeline: empty; give at least one op");
  }
  for (const std::string& part : SplitTopLevel(text)) {
    auto op = ParseOp(part);
    if (!op.ok()) return op.status();
    ops.push_back(*std::move(op));
  }
  return ops;
}

std::string PipelineToText(const std::vector<v1::Op>& ops) {
  std::vector<std::string> parts;
  for (const v1::Op& op : ops) {
    switch (op.op_case()) {
      case v1::Op::OP_NOT_SET: parts.push_back("<unset>"); break;
      case v1::Op::kDeclared: parts.push_back(DeclaredOpText(op.declared())); break;
      default:
        if (const OpEntry* entry = FindOp(op); entry != nullptr && entry->user != nullptr) {
          parts.push_back(entry->user->print(op));
        } else {
          parts.push_back(OpToText(op, v1::Op::descriptor()->FindFieldByNumber(op.op_case())));
        }
        break;
    }
  }
  return absl::StrJoin(parts, ", ");
}

// pipeline_text_internal.h
std::vector<TextParam> OpParams(const FieldDescriptor* which) {
  const OpText& text = TextOf(which);
  const google::protobuf::Descriptor* d = which->message_type();
  if (text.arguments.empty()) return MessageParams(d);
  std::vector<TextParam> params;
  for (const OpText::Argument& a : text.arguments) {
    const FieldDescriptor* field = d->FindFieldByName(a.field);
    const FieldDescriptor* max = a.max != nullptr ? d->FindFieldByName(a.max) : nullptr;
    if (field == nullptr || (a.max != nullptr && max == nullptr)) continue;  // CoreOpsTest: never
    params.push_back({a.name, field, max});
  }
  return params;
}

absl::StatusOr<float> ParseFloat(absl::string_view v) {
  float f;
  if (!absl::SimpleAtof(v, &f)) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a number"));
  return f;
}

std::string FloatText(float f) { return ShortestText(f); }
std::string DoubleText(double d) { return ShortestText(d); }

}  // namespace stoker
