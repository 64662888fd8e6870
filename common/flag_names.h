// Lets command lines spell flags with dashes (--data-root) as well as with
// Abseil's underscores (--data_root). Thread-compatible; call once in main
// before absl::ParseCommandLine.
#ifndef STOKER_COMMON_FLAG_NAMES_H_
#define STOKER_COMMON_FLAG_NAMES_H_

#include <string>
#include <vector>

namespace stoker {

// Rewrites "--foo-bar[=v]" to "--foo_bar[=v]" in place (the name only; values
// and arguments after a bare "--" are left alone). Returns storage that must
// outlive argv's use.
std::vector<std::string> DashesToUnderscores(int argc, char** argv);

}  // namespace stoker

#endif  // STOKER_COMMON_FLAG_NAMES_H_
