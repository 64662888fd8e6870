// Builds tar archives in memory for tests: ustar headers, GNU long names for
// paths over 100 bytes. Thread-compatible.
#ifndef STOKER_TESTS_TESTDATA_TAR_WRITER_H_
#define STOKER_TESTS_TESTDATA_TAR_WRITER_H_

#include <string>
#include <utility>
#include <vector>

namespace stoker::testing {

// (name, content) pairs in order; ends with the two zero blocks.
std::string TarArchive(const std::vector<std::pair<std::string, std::string>>& members);

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_TAR_WRITER_H_
