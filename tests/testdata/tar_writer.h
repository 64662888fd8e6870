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

// One member (header + data, padded) whose 12-byte size field is given raw,
// for hostile archives: `size_field` is copied as is (octal text or GNU
// base-256 bytes); `type` is the typeflag ('0' file, 'x' pax, 'L' long name).
std::string TarMemberRaw(const std::string& name, const std::string& size_field, char type, const std::string& data);

// A pax extended header member carrying `records` ("key=value" each).
std::string TarPax(const std::vector<std::string>& records);

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_TAR_WRITER_H_
