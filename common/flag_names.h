// Command-line parsing shared by Stoker's binaries: flags may be spelled with
// dashes (--data-root) as well as Abseil's underscores (--data_root), and
// --help lists the flags defined in the program's own *_main.cc. Call once at
// the top of main().
#ifndef STOKER_COMMON_FLAG_NAMES_H_
#define STOKER_COMMON_FLAG_NAMES_H_

#include <string>
#include <vector>

namespace stoker {

// Rewrites "--foo-bar[=v]" to "--foo_bar[=v]" in place (the name only; values,
// also a separate value after a non-boolean flag such as "--dataset -a-b",
// and arguments after a bare "--" are left alone). Returns storage that must
// outlive argv's use.
std::vector<std::string> DashesToUnderscores(int argc, char** argv);

// Sets the usage text, then parses flags as above (exits on --help or a bad
// flag). Returns the positional arguments.
std::vector<char*> ParseFlags(int argc, char** argv, const char* usage);

}  // namespace stoker

#endif  // STOKER_COMMON_FLAG_NAMES_H_
