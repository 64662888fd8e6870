#include "common/pipeline_text.h"
#include "common/pipeline_text_internal.h"

#include <algorithm>
#include <functional>
#include <map>
#include <type_traits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace stoker {
namespace {

// One argument's setter: receives the raw text of the value.
using Setter = std::function<absl::Status(absl::string_view value, v1::Op& op)>;

struct OpSyntax {
  std::vector<std::string> params;  // positional order
  std::map<std::string, Setter> setters;
};

absl::StatusOr<float> ParseFloat(absl::string_view v) {
  float f;
  if (!absl::SimpleAtof(v, &f)) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a number"));
  return f;
}

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

const char* InterpolationName(v1::Interpolation i) {
  return i == v1::NEAREST ? "nearest" : i == v1::BICUBIC ? "bicubic" : "bilinear";
}

absl::StatusOr<v1::Interpolation> ParseInterpolation(absl::string_view v) {
  if (v == "bilinear") return v1::BILINEAR;
  if (v == "nearest") return v1::NEAREST;
  if (v == "bicubic") return v1::BICUBIC;
  return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not bilinear, nearest or bicubic"));
}

// "a:b:c" -> three floats.
absl::StatusOr<std::vector<float>> ParseTriple(absl::string_view v) {
  std::vector<float> out;
  for (absl::string_view part : absl::StrSplit(v, ':')) {
    auto f = ParseFloat(part);
    if (!f.ok()) return f.status();
    out.push_back(*f);
  }
  if (out.size() != 3) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not three values r:g:b"));
  return out;
}

absl::StatusOr<bool> ParseBool(absl::string_view v) {
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not true or false"));
}

Setter BoolSetter(void (*set)(v1::Op&, bool)) {
  return [set](absl::string_view v, v1::Op& op) {
    auto b = ParseBool(v);
    if (b.ok()) set(op, *b);
    return b.status();
  };
}

Setter FloatSetter(void (*set)(v1::Op&, float)) {
  return [set](absl::string_view v, v1::Op& op) {
    auto f = ParseFloat(v);
    if (f.ok()) set(op, *f);
    return f.status();
  };
}

// Ops added after the table below are read and printed from their message's
// fields: the fields in declaration order are the positional arguments; a
// pair NAME_min, NAME_max is one argument NAME=lo:hi; repeated floats are
// a:b:c; enums are their lower-case names; bools true or false.
using google::protobuf::FieldDescriptor;

struct Param {
  std::string name;
  const FieldDescriptor* field = nullptr;
  const FieldDescriptor* max = nullptr;  // set for a range: `field` is NAME_min
};

const FieldDescriptor* ReflectedOp(absl::string_view name) {
  const FieldDescriptor* f = v1::Op::descriptor()->FindFieldByName(std::string(name));
  if (f == nullptr || f->containing_oneof() == nullptr || f->message_type() == nullptr) return nullptr;
  return f;
}

std::vector<Param> Params(const google::protobuf::Descriptor* d) {
  std::vector<Param> params;
  // Ops whose NAME_min / NAME_max are two arguments, as their references
  // name them (torchaudio's f_min, f_max), not one range NAME=lo:hi.
  const bool separate = d == v1::MelSpectrogram::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string& n = f->name();
    if (separate) {
      params.push_back({n, f, nullptr});
      continue;
    }
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
      if (value == nullptr) return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not one of its values"));
      r->SetEnum(m, f, value);
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError("an argument of a type the text form does not have");
  }
}

absl::Status SetParam(absl::string_view v, const Param& p, google::protobuf::Message* m) {
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

std::string FloatText(float f) { return ShortestText(f); }

std::string ScalarText(const google::protobuf::Message& m, const FieldDescriptor* f, int index) {
  const google::protobuf::Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_FLOAT:
      return FloatText(index < 0 ? r->GetFloat(m, f) : r->GetRepeatedFloat(m, f, index));
    case FieldDescriptor::CPPTYPE_INT32:
      return absl::StrCat(index < 0 ? r->GetInt32(m, f) : r->GetRepeatedInt32(m, f, index));
    case FieldDescriptor::CPPTYPE_BOOL:
      return r->GetBool(m, f) ? "true" : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return absl::AsciiStrToLower(r->GetEnum(m, f)->name());
    default:
      return "?";
  }
}

// NAME(arg=value, ...) with the arguments that are set.
std::string ReflectedText(const v1::Op& op, const FieldDescriptor* which) {
  const google::protobuf::Message& m = op.GetReflection()->GetMessage(op, which);
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<std::string> args;
  for (const Param& p : Params(m.GetDescriptor())) {
    if (p.max != nullptr) {
      if (r->HasField(m, p.field) || r->HasField(m, p.max)) {
        args.push_back(absl::StrCat(p.name, "=", ScalarText(m, p.field, -1), ":", ScalarText(m, p.max, -1)));
      }
    } else if (p.field->is_repeated()) {
      std::vector<std::string> values;
      for (int i = 0; i < r->FieldSize(m, p.field); ++i) values.push_back(ScalarText(m, p.field, i));
      if (!values.empty()) args.push_back(absl::StrCat(p.name, "=", absl::StrJoin(values, ":")));
    } else if (r->HasField(m, p.field)) {
      args.push_back(absl::StrCat(p.name, "=", ScalarText(m, p.field, -1)));
    }
  }
  return absl::StrCat(which->name(), "(", absl::StrJoin(args, ", "), ")");
}

absl::StatusOr<v1::Op> ParseReflectedOp(const std::string& name, absl::string_view text, size_t open,
                                        const FieldDescriptor* which) {
  v1::Op op;
  google::protobuf::Message* m = op.GetReflection()->MutableMessage(&op, which);
  if (open == absl::string_view::npos) return op;
  if (text.back() != ')') {
    return absl::InvalidArgumentError(absl::StrCat("pipeline: op '", text, "' lacks a closing ')'"));
  }
  const std::vector<Param> params = Params(m->GetDescriptor());
  absl::string_view args = text.substr(open + 1, text.size() - open - 2);
  if (absl::StripAsciiWhitespace(args).empty()) return op;
  size_t position = 0;
  std::vector<std::string> names;
  for (const Param& p : params) names.push_back(p.name);
  for (absl::string_view arg : absl::StrSplit(args, ',')) {
    arg = absl::StripAsciiWhitespace(arg);
    const Param* param = nullptr;
    absl::string_view value = arg;
    const size_t eq = arg.find('=');
    if (eq != absl::string_view::npos) {
      const absl::string_view key = absl::StripAsciiWhitespace(arg.substr(0, eq));
      value = absl::StripAsciiWhitespace(arg.substr(eq + 1));
      for (const Param& p : params) {
        if (p.name == key) param = &p;
      }
      if (param == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, " has no argument '", key, "'; it takes ",
                                                       names.empty() ? "none" : absl::StrJoin(names, ", ")));
      }
    } else if (position < params.size()) {
      param = &params[position];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline: ", name, " takes at most ", params.size(), " arguments"));
    }
    ++position;
    if (absl::Status s = SetParam(value, *param, m); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, ".", param->name, ": ", s.message()));
    }
  }
  return op;
}


// A user op's argument value: true/false, an integer, a number, or a string
// (bare, or in single or double quotes).
absl::StatusOr<v1::OpArgument> ParseArgumentValue(absl::string_view v) {
  v1::OpArgument a;
  int64_t i;
  double d;
  if (v.empty()) return absl::InvalidArgumentError("an empty value");
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) {
    a.set_string_value(std::string(v.substr(1, v.size() - 2)));
  } else if (v == "true" || v == "false") {
    a.set_bool_value(v == "true");
  } else if (absl::SimpleAtoi(v, &i)) {
    a.set_int_value(i);
  } else if (absl::SimpleAtod(v, &d)) {
    a.set_float_value(d);
  } else if (absl::StrContains(v, '\'') || absl::StrContains(v, '"') || absl::StrContains(v, '(') ||
             absl::StrContains(v, ')')) {
    return absl::InvalidArgumentError(absl::StrCat("'", v, "' is not a number, true/false or a string"));
  } else {
    a.set_string_value(std::string(v));
  }
  return a;
}

std::string ArgumentValueText(const v1::OpArgument& a) {
  switch (a.value_case()) {
    case v1::OpArgument::kIntValue:
      return absl::StrCat(a.int_value());
    case v1::OpArgument::kFloatValue: {
      std::string text = ShortestText(a.float_value());
      // Keep it a float when read back ("2" would be an integer).
      if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      return text;
    }
    case v1::OpArgument::kBoolValue:
      return a.bool_value() ? "true" : "false";
    case v1::OpArgument::kStringValue: {
      auto back = ParseArgumentValue(a.string_value());
      const bool bare = back.ok() && back->has_string_value() && back->string_value() == a.string_value() &&
                        absl::StripAsciiWhitespace(a.string_value()) == a.string_value();
      if (bare) return a.string_value();
      return absl::StrContains(a.string_value(), '\'') ? absl::StrCat("\"", a.string_value(), "\"")
                                                        : absl::StrCat("'", a.string_value(), "'");
    }
    default:
      return "''";
  }
}

// The arguments of python(...) and of a plugin op: name=value, or for a
// plugin positional values (bound to its parameters by the server).
// python's first positional argument is the function, "module:function".
absl::StatusOr<v1::Op> ParseUserOp(const std::string& name, absl::string_view text, size_t open) {
  v1::Op op;
  const bool python = name == "python";
  if (python) {
    op.mutable_python();
  } else {
    op.mutable_plugin()->set_name(name);
  }
  if (open != absl::string_view::npos) {
    if (text.back() != ')') {
      return absl::InvalidArgumentError(absl::StrCat("pipeline: op '", text, "' lacks a closing ')'"));
    }
    absl::string_view args = text.substr(open + 1, text.size() - open - 2);
    int position = 0;
    if (!absl::StripAsciiWhitespace(args).empty()) {
      for (absl::string_view arg : absl::StrSplit(args, ',')) {
        arg = absl::StripAsciiWhitespace(arg);
        const size_t eq = arg.find('=');
        std::string key;
        absl::string_view value = arg;
        if (eq != absl::string_view::npos) {
          key = std::string(absl::StripAsciiWhitespace(arg.substr(0, eq)));
          value = absl::StripAsciiWhitespace(arg.substr(eq + 1));
          if (key.empty()) return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, ": '", arg, "' has no name"));
        }
        const int here = position++;
        if (python && here == 0 && key.empty()) {
          op.mutable_python()->set_function(std::string(value));
          continue;
        }
        if (python && key.empty()) {
          return absl::InvalidArgumentError(absl::StrCat("pipeline: python takes the function and then name=value "
                                                         "arguments only; '", arg, "' has no name"));
        }
        if (key == "p") {
          auto f = ParseFloat(value);
          if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, ".p: ", f.status().message()));
          python ? op.mutable_python()->set_p(*f) : op.mutable_plugin()->set_p(*f);
          continue;
        }
        auto a = ParseArgumentValue(value);
        if (!a.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, ".", key.empty() ? absl::StrCat("[", here, "]") : key,
                                                         ": ", a.status().message()));
        }
        a->set_name(key);
        *(python ? op.mutable_python()->add_kwargs() : op.mutable_plugin()->add_args()) = *std::move(a);
      }
    }
  }
  if (python && op.python().function().empty()) {
    return absl::InvalidArgumentError("pipeline: python needs its function first, e.g. python(mypkg.aug:strong_aug)");
  }
  return op;
}

std::string UserOpText(const v1::Op& op) {
  std::vector<std::string> args;
  const bool python = op.has_python();
  if (python) args.push_back(op.python().function());
  const bool has_p = python ? op.python().has_p() : op.plugin().has_p();
  if (has_p) args.push_back(absl::StrCat("p=", FloatText(python ? op.python().p() : op.plugin().p())));
  for (const v1::OpArgument& a : python ? op.python().kwargs() : op.plugin().args()) {
    args.push_back(a.name().empty() ? ArgumentValueText(a) : absl::StrCat(a.name(), "=", ArgumentValueText(a)));
  }
  return absl::StrCat(python ? "python" : op.plugin().name(), "(", absl::StrJoin(args, ", "), ")");
}

// A plugin op's name: lower-case words joined by one dot or more ("team.op").
bool IsPluginOpName(absl::string_view name) {
  if (!absl::StrContains(name, '.')) return false;
  for (absl::string_view part : absl::StrSplit(name, '.')) {
    if (part.empty() || !(absl::ascii_isalpha(part[0]) || part[0] == '_')) return false;
    for (char c : part) {
      if (!(absl::ascii_isalnum(c) || c == '_')) return false;
    }
  }
  return true;
}

const std::map<std::string, OpSyntax>& Syntax() {
  static const auto* syntax = new std::map<std::string, OpSyntax>{
      {"random_resized_crop",
       {{"size", "scale", "ratio", "interpolation", "antialias"},
        {{"antialias", BoolSetter([](v1::Op& op, bool b) { op.mutable_random_resized_crop()->set_antialias(b); })},
         {"interpolation",
          [](absl::string_view v, v1::Op& op) {
            auto i = ParseInterpolation(v);
            if (i.ok()) op.mutable_random_resized_crop()->set_interpolation(*i);
            return i.status();
          }},
         {"size",
          [](absl::string_view v, v1::Op& op) {
            auto i = ParseInt(v);
            if (i.ok()) op.mutable_random_resized_crop()->set_size(*i);
            return i.status();
          }},
         {"scale",
          [](absl::string_view v, v1::Op& op) {
            auto r = ParseRange(v);
            if (!r.ok()) return r.status();
            op.mutable_random_resized_crop()->set_scale_min(r->first);
            op.mutable_random_resized_crop()->set_scale_max(r->second);
            return absl::OkStatus();
          }},
         {"ratio",
          [](absl::string_view v, v1::Op& op) {
            auto r = ParseRange(v);
            if (!r.ok()) return r.status();
            op.mutable_random_resized_crop()->set_ratio_min(r->first);
            op.mutable_random_resized_crop()->set_ratio_max(r->second);
            return absl::OkStatus();
          }}}}},
      {"center_crop",
       {{"size"},
        {{"size",
          [](absl::string_view v, v1::Op& op) {
            auto i = ParseInt(v);
            if (i.ok()) op.mutable_center_crop()->set_size(*i);
            return i.status();
          }}}}},
      {"resize",
       {{"size", "interpolation", "antialias"},
        {{"antialias", BoolSetter([](v1::Op& op, bool b) { op.mutable_resize()->set_antialias(b); })},
         {"size",
          [](absl::string_view v, v1::Op& op) {
            auto i = ParseInt(v);
            if (i.ok()) op.mutable_resize()->set_shorter_side(*i);
            return i.status();
          }},
         {"interpolation",
          [](absl::string_view v, v1::Op& op) {
            auto i = ParseInterpolation(v);
            if (i.ok()) op.mutable_resize()->set_interpolation(*i);
            return i.status();
          }}}}},
      {"color_jitter",
       {{"brightness", "contrast", "saturation", "hue"},
        {{"brightness", FloatSetter([](v1::Op& op, float f) { op.mutable_color_jitter()->set_brightness(f); })},
         {"contrast", FloatSetter([](v1::Op& op, float f) { op.mutable_color_jitter()->set_contrast(f); })},
         {"saturation", FloatSetter([](v1::Op& op, float f) { op.mutable_color_jitter()->set_saturation(f); })},
         {"hue", FloatSetter([](v1::Op& op, float f) { op.mutable_color_jitter()->set_hue(f); })}}}},
      {"normalize",
       {{"mean", "std"},
        {{"mean",
          [](absl::string_view v, v1::Op& op) {
            auto t = ParseTriple(v);
            if (!t.ok()) return t.status();
            op.mutable_normalize()->clear_mean();
            for (float f : *t) op.mutable_normalize()->add_mean(f);
            return absl::OkStatus();
          }},
         {"std",
          [](absl::string_view v, v1::Op& op) {
            auto t = ParseTriple(v);
            if (!t.ok()) return t.status();
            op.mutable_normalize()->clear_std();
            for (float f : *t) op.mutable_normalize()->add_std(f);
            return absl::OkStatus();
          }}}}},
      {"random_vertical_flip",
       {{"p"},
        {{"p", FloatSetter([](v1::Op& op, float f) { op.mutable_random_vertical_flip()->set_p(f); })}}}},
      {"resize_pad",
       {{"size", "interpolation", "antialias"},
        {{"antialias", BoolSetter([](v1::Op& op, bool b) { op.mutable_resize_pad()->set_antialias(b); })},
         {"size",
          [](absl::string_view v, v1::Op& op) {
            auto i = ParseInt(v);
            if (i.ok()) op.mutable_resize_pad()->set_size(*i);
            return i.status();
          }},
         {"interpolation",
          [](absl::string_view v, v1::Op& op) {
            auto i = ParseInterpolation(v);
            if (i.ok()) op.mutable_resize_pad()->set_interpolation(*i);
            return i.status();
          }}}}},
      {"random_iou_crop",
       {{"scale", "aspect_ratio", "options", "trials"},
        {{"scale",
          [](absl::string_view v, v1::Op& op) {
            auto r = ParseRange(v);
            if (!r.ok()) return r.status();
            op.mutable_random_iou_crop()->set_min_scale(r->first);
            op.mutable_random_iou_crop()->set_max_scale(r->second);
            return absl::OkStatus();
          }},
         {"aspect_ratio",
          [](absl::string_view v, v1::Op& op) {
            auto r = ParseRange(v);
            if (!r.ok()) return r.status();
            op.mutable_random_iou_crop()->set_min_aspect_ratio(r->first);
            op.mutable_random_iou_crop()->set_max_aspect_ratio(r->second);
            return absl::OkStatus();
          }},
         {"options",
          [](absl::string_view v, v1::Op& op) {
            op.mutable_random_iou_crop()->clear_sampler_options();
            for (absl::string_view part : absl::StrSplit(v, ':')) {
              auto f = ParseFloat(part);
              if (!f.ok()) return f.status();
              op.mutable_random_iou_crop()->add_sampler_options(*f);
            }
            return absl::OkStatus();
          }},
         {"trials",
          [](absl::string_view v, v1::Op& op) {
            auto i = ParseInt(v);
            if (i.ok()) op.mutable_random_iou_crop()->set_trials(*i);
            return i.status();
          }}}}},
      {"random_horizontal_flip",
       {{"p"},
        {{"p",
          [](absl::string_view v, v1::Op& op) {
            auto f = ParseFloat(v);
            if (f.ok()) op.mutable_random_horizontal_flip()->set_p(*f);
            return f.status();
          }}}}},
  };
  return *syntax;
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
  if (name == "python" || IsPluginOpName(name)) return ParseUserOp(name, text, open);
  auto it = Syntax().find(name);
  if (it == Syntax().end()) {
    if (const FieldDescriptor* which = ReflectedOp(name)) return ParseReflectedOp(name, text, open, which);
    std::vector<std::string> known;
    for (int i = 0; i < v1::Op::descriptor()->field_count(); ++i) {
      known.push_back(v1::Op::descriptor()->field(i)->name());
    }
    known.erase(std::remove(known.begin(), known.end(), "plugin"), known.end());
    std::sort(known.begin(), known.end());
    return absl::InvalidArgumentError(absl::StrCat("pipeline: unknown op '", name, "'; known ops: ",
                                                   absl::StrJoin(known, ", "),
                                                   " (and plugin ops the server loaded, named team.op)"));
  }
  v1::Op op;
  const OpSyntax& syntax = it->second;
  // Mark the op as set even when it has no arguments.
  if (name == "random_resized_crop") op.mutable_random_resized_crop();
  if (name == "center_crop") op.mutable_center_crop();
  if (name == "resize") op.mutable_resize();
  if (name == "random_horizontal_flip") op.mutable_random_horizontal_flip();
  if (name == "color_jitter") op.mutable_color_jitter();
  if (name == "normalize") op.mutable_normalize();
  if (name == "random_vertical_flip") op.mutable_random_vertical_flip();
  if (name == "resize_pad") op.mutable_resize_pad();
  if (name == "random_iou_crop") op.mutable_random_iou_crop();
  if (open == absl::string_view::npos) return op;
  if (text.back() != ')') {
    return absl::InvalidArgumentError(absl::StrCat("pipeline: op '", text, "' lacks a closing ')'"));
  }
  absl::string_view args = text.substr(open + 1, text.size() - open - 2);
  if (absl::StripAsciiWhitespace(args).empty()) return op;
  size_t position = 0;
  for (absl::string_view arg : absl::StrSplit(args, ',')) {
    arg = absl::StripAsciiWhitespace(arg);
    std::string key;
    absl::string_view value = arg;
    const size_t eq = arg.find('=');
    if (eq != absl::string_view::npos) {
      key = std::string(absl::StripAsciiWhitespace(arg.substr(0, eq)));
      value = absl::StripAsciiWhitespace(arg.substr(eq + 1));
    } else if (position < syntax.params.size()) {
      key = syntax.params[position];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline: ", name, " takes at most ", syntax.params.size(), " arguments"));
    }
    ++position;
    auto setter = syntax.setters.find(key);
    if (setter == syntax.setters.end()) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, " has no argument '", key,
                                                     "'; it takes ", absl::StrJoin(syntax.params, ", ")));
    }
    absl::Status s = setter->second(value, op);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, ".", key, ": ", s.message()));
    }
  }
  return op;
}

}  // namespace

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
      case v1::Op::kRandomResizedCrop: {
        const auto& o = op.random_resized_crop();
        std::string text = absl::StrFormat("random_resized_crop(%d", o.size());
        // Unset ranges stay unset, so the server's defaults apply.
        if (o.scale_min() != 0 || o.scale_max() != 0) {
          absl::StrAppendFormat(&text, ", scale=%g:%g", o.scale_min(), o.scale_max());
        }
        if (o.ratio_min() != 0 || o.ratio_max() != 0) {
          absl::StrAppendFormat(&text, ", ratio=%g:%g", o.ratio_min(), o.ratio_max());
        }
        if (o.interpolation() != v1::BILINEAR) {
          absl::StrAppend(&text, ", interpolation=", InterpolationName(o.interpolation()));
        }
        if (o.has_antialias() && !o.antialias()) absl::StrAppend(&text, ", antialias=false");
        parts.push_back(text + ")");
        break;
      }
      case v1::Op::kCenterCrop:
        parts.push_back(absl::StrFormat("center_crop(%d)", op.center_crop().size()));
        break;
      case v1::Op::kResize: {
        std::string text = absl::StrFormat("resize(%d", op.resize().shorter_side());
        if (op.resize().interpolation() != v1::BILINEAR) {
          absl::StrAppend(&text, ", interpolation=", InterpolationName(op.resize().interpolation()));
        }
        if (op.resize().has_antialias() && !op.resize().antialias()) absl::StrAppend(&text, ", antialias=false");
        parts.push_back(text + ")");
        break;
      }
      case v1::Op::kColorJitter: {
        const auto& o = op.color_jitter();
        parts.push_back(absl::StrFormat("color_jitter(%g, %g, %g, %g)", o.brightness(), o.contrast(), o.saturation(),
                                        o.hue()));
        break;
      }
      case v1::Op::kNormalize: {
        // Only what is set: an empty list does not parse back (found by the fuzzer).
        const auto& o = op.normalize();
        std::vector<std::string> args;
        if (o.mean_size() > 0) args.push_back("mean=" + absl::StrJoin(o.mean(), ":"));
        if (o.std_size() > 0) args.push_back("std=" + absl::StrJoin(o.std(), ":"));
        parts.push_back(absl::StrCat("normalize(", absl::StrJoin(args, ", "), ")"));
        break;
      }
      case v1::Op::kRandomHorizontalFlip:
        parts.push_back(absl::StrFormat("random_horizontal_flip(%g)", op.random_horizontal_flip().p()));
        break;
      case v1::Op::kRandomVerticalFlip:
        parts.push_back(absl::StrFormat("random_vertical_flip(%g)", op.random_vertical_flip().p()));
        break;
      case v1::Op::kResizePad: {
        std::string text = absl::StrFormat("resize_pad(%d", op.resize_pad().size());
        if (op.resize_pad().interpolation() != v1::BILINEAR) {
          absl::StrAppend(&text, ", interpolation=", InterpolationName(op.resize_pad().interpolation()));
        }
        if (op.resize_pad().has_antialias() && !op.resize_pad().antialias()) {
          absl::StrAppend(&text, ", antialias=false");
        }
        parts.push_back(text + ")");
        break;
      }
      case v1::Op::kRandomIouCrop: {
        const auto& o = op.random_iou_crop();
        std::vector<std::string> args;  // only what is set: the server's defaults apply to the rest
        if (o.min_scale() != 0 || o.max_scale() != 0) {
          args.push_back(absl::StrFormat("scale=%g:%g", o.min_scale(), o.max_scale()));
        }
        if (o.min_aspect_ratio() != 0 || o.max_aspect_ratio() != 0) {
          args.push_back(absl::StrFormat("aspect_ratio=%g:%g", o.min_aspect_ratio(), o.max_aspect_ratio()));
        }
        if (o.sampler_options_size() > 0) args.push_back("options=" + absl::StrJoin(o.sampler_options(), ":"));
        if (o.trials() != 0) args.push_back(absl::StrCat("trials=", o.trials()));
        parts.push_back(absl::StrCat("random_iou_crop(", absl::StrJoin(args, ", "), ")"));
        break;
      }
      case v1::Op::kPython:
      case v1::Op::kPlugin:
        parts.push_back(UserOpText(op));
        break;
      case v1::Op::OP_NOT_SET:
        parts.push_back("<unset>");
        break;
      default:
        parts.push_back(ReflectedText(op, v1::Op::descriptor()->FindFieldByNumber(op.op_case())));
        break;
    }
  }
  return absl::StrJoin(parts, ", ");
}

// pipeline_text_internal.h: what the generated reference reads.
std::vector<TextParam> ReflectedParams(const google::protobuf::Descriptor* d) {
  std::vector<TextParam> out;
  for (const Param& p : Params(d)) out.push_back({p.name, p.field, p.max});
  return out;
}

const std::vector<std::string>* BuiltInParams(const std::string& op) {
  auto it = Syntax().find(op);
  return it == Syntax().end() ? nullptr : &it->second.params;
}

}  // namespace stoker
