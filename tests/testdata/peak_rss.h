// The peak resident memory a piece of work adds to this process: the
// high-water mark is reset first (/proc/self/clear_refs "5", Linux 4.0+), so
// the figure is the work's own, not an earlier test's. Thread-compatible:
// other threads' allocations during the work count too.
#ifndef STOKER_TESTS_TESTDATA_PEAK_RSS_H_
#define STOKER_TESTS_TESTDATA_PEAK_RSS_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace stoker::testing {

// A field of /proc/self/status in bytes ("VmRSS:", "VmHWM:"); -1 if absent.
inline int64_t ProcStatusBytes(const char* name) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) == 0) return std::atoll(line.c_str() + std::strlen(name)) * 1024;
  }
  return -1;
}

// VmHWM after `fn` minus VmRSS before it; -1 where the mark cannot be reset
// (the caller skips its check, saying why).
template <typename F>
int64_t PeakRssGrowth(F fn) {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.close();
  if (!clear) return -1;
  const int64_t before = ProcStatusBytes("VmRSS:");
  fn();
  return ProcStatusBytes("VmHWM:") - before;
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_PEAK_RSS_H_
