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

#if defined(__SANITIZE_ADDRESS__)
#define STOKER_PEAK_RSS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STOKER_PEAK_RSS_SANITIZED 1
#endif
#endif

// Why a peak cannot be measured in this build, or null. AddressSanitizer
// keeps freed blocks in its quarantine (256 MB): they stay resident.
inline const char* PeakRssUnmeasurable() {
#ifdef STOKER_PEAK_RSS_SANITIZED
  return "under AddressSanitizer freed memory stays resident (its quarantine)";
#else
  return nullptr;
#endif
}

// What a test that got -1 from PeakRssGrowth says as it skips its check.
inline std::string PeakRssSkipReason() {
  return std::string("the peak RSS is not measurable here: ") +
         (PeakRssUnmeasurable() != nullptr ? PeakRssUnmeasurable() : "/proc/self/clear_refs cannot be written");
}

// VmHWM after `fn` minus VmRSS before it; -1 where it cannot be measured
// (the mark cannot be reset, or PeakRssUnmeasurable()): the caller skips its
// check, saying why.
template <typename F>
int64_t PeakRssGrowth(F fn) {
  if (PeakRssUnmeasurable() != nullptr) {
    fn();
    return -1;
  }
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
