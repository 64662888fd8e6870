#include "common/flag_names.h"

#include <algorithm>

namespace stoker {

std::vector<std::string> DashesToUnderscores(int argc, char** argv) {
  std::vector<std::string> storage(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    std::string& arg = storage[i];
    if (arg == "--") break;
    if (arg.size() < 3 || arg[0] != '-') continue;
    const size_t start = arg[1] == '-' ? 2 : 1;
    const size_t end = std::min(arg.find('='), arg.size());
    std::replace(arg.begin() + start, arg.begin() + end, '-', '_');
  }
  for (int i = 1; i < argc; ++i) argv[i] = storage[i].data();
  return storage;
}

}  // namespace stoker
