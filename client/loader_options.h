// The training loader's options, written once in include/stoker/client_options.inc (name,
// type, default, unit, Python name, help), and the client's configuration made
// from them: every value checked, the pipeline text parsed once. The Python
// binding, the Loader's docstring and the reference page read the same
// table. Value types and pure functions; thread-compatible.
#ifndef STOKER_CLIENT_LOADER_OPTIONS_H_
#define STOKER_CLIENT_LOADER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/training_loader.h"
#include "dataplane/ops/pipeline_text.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// The options, one member per line of include/stoker/client_options.inc, with its default.
struct LoaderOptions {
#define STOKER_OPTION(type, name, default_value, unit, python, help) type name = default_value;
#include "stoker/client_options.inc"
#undef STOKER_OPTION
};

// One option as include/stoker/client_options.inc describes it. `type` is the C++ type's
// name as written there; `python` the Loader's keyword ("": set from another).
struct OptionInfo {
  const char* type;
  const char* name;
  const char* unit;
  const char* python;
  const char* help;
};

// Every option, in include/stoker/client_options.inc's order.
absl::Span<const OptionInfo> LoaderOptionTable();

// Calls f(info, &LoaderOptions::member) for every option, in the table's
// order: how the binding declares its fields.
template <typename F>
void ForEachOptionMember(F&& f) {
  const OptionInfo* info = LoaderOptionTable().data();
#define STOKER_OPTION(type, name, default_value, unit, python, help) f(*info++, &LoaderOptions::name);
#include "stoker/client_options.inc"
#undef STOKER_OPTION
}

// An option's value as text: numbers as C++ streams them, a string quoted,
// a list as [a, b]; what the reference page shows as the default.
std::string OptionValueText(const LoaderOptions& o, std::string_view name);

// The session's part of the options (dataset, pipeline, fields, batch,
// policies, order) into `session`; INVALID_ARGUMENT names the option.
absl::Status SessionFromOptions(const LoaderOptions& o, v1::SessionConfig* session);
// The device's part (device, dtype, layout, normalisation, slots).
absl::Status DeviceFromOptions(const LoaderOptions& o, DeviceOptions* d);
// All of it: the client, the session, the device, metrics and MixUp/CutMix.
absl::StatusOr<LoaderConfig> ToConfig(const LoaderOptions& o);

}  // namespace stoker

#endif  // STOKER_CLIENT_LOADER_OPTIONS_H_
