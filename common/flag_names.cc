#include "common/flag_names.h"

#include <algorithm>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stoker {

std::vector<std::string> DashesToUnderscores(int argc, char** argv) {
  std::vector<std::string> storage(argv, argv + argc);
  bool value_next = false;  // the previous argument was a flag that takes the next as its value
  for (int i = 1; i < argc; ++i) {
    std::string& arg = storage[i];
    if (value_next) {  // "--dataset -a-b": a value, even when it starts with '-'
      value_next = false;
      continue;
    }
    if (arg == "--") break;
    if (arg.size() < 3 || arg[0] != '-') continue;
    const size_t start = arg[1] == '-' ? 2 : 1;
    const size_t eq = arg.find('=');
    const size_t end = std::min(eq, arg.size());
    std::replace(arg.begin() + start, arg.begin() + end, '-', '_');
    if (eq == std::string::npos) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(arg.substr(start));
      value_next = flag != nullptr && !flag->IsOfType<bool>();
    }
  }
  for (int i = 1; i < argc; ++i) argv[i] = storage[i].data();
  return storage;
}

}  // namespace stoker

namespace stoker {

std::vector<char*> ParseFlags(int argc, char** argv, const char* usage) {
  // Kept for the life of the process: argv points into it.
  static auto* storage = new std::vector<std::string>(DashesToUnderscores(argc, argv));
  (void)storage;
  absl::SetProgramUsageMessage(
      absl::StrCat(usage, "\nFlags may be spelled with dashes or underscores (--data-root, --data_root)."));
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "_main.cc") || absl::EndsWith(path, "_flags.cc");  // shared: TLS, storage
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
  return absl::ParseCommandLine(argc, argv);
}

}  // namespace stoker
