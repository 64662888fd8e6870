// The text form of the user ops (pipeline_text.h): python(module:function,
// name=value, ...) and plugin ops (team.op(value, name=value, ...)), whose
// arguments are checked by their Python stage or plugin (their entries in
// the op registry, user_op_entries.cc, read and print them with these).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dataplane/ops/pipeline_text_internal.h"

namespace stoker {
namespace {

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
    case v1::OpArgument::kIntValue: return absl::StrCat(a.int_value());
    case v1::OpArgument::kFloatValue: {
      std::string text = DoubleText(a.float_value());
      // Keep it a float when read back ("2" would be an integer).
      if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
      return text;
    }
    case v1::OpArgument::kBoolValue: return a.bool_value() ? "true" : "false";
    case v1::OpArgument::kStringValue: {
      auto back = ParseArgumentValue(a.string_value());
      const bool bare = back.ok() && back->has_string_value() && back->string_value() == a.string_value() &&
                        absl::StripAsciiWhitespace(a.string_value()) == a.string_value();
      if (bare) return a.string_value();
      return absl::StrContains(a.string_value(), '\'') ? absl::StrCat("\"", a.string_value(), "\"")
                                                       : absl::StrCat("'", a.string_value(), "'");
    }
    default: return "''";
  }
}

}  // namespace

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
          if (key.empty())
            return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, ": '", arg, "' has no name"));
        }
        const int here = position++;
        if (python && here == 0 && key.empty()) {
          op.mutable_python()->set_function(std::string(value));
          continue;
        }
        if (python && key.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("pipeline: python takes the function and then name=value "
                           "arguments only; '",
                           arg, "' has no name"));
        }
        if (key == "p") {
          auto f = ParseFloat(value);
          if (!f.ok())
            return absl::InvalidArgumentError(absl::StrCat("pipeline: ", name, ".p: ", f.status().message()));
          python ? op.mutable_python()->set_p(*f) : op.mutable_plugin()->set_p(*f);
          continue;
        }
        auto a = ParseArgumentValue(value);
        if (!a.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "pipeline: ", name, ".", key.empty() ? absl::StrCat("[", here, "]") : key, ": ", a.status().message()));
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

}  // namespace stoker
