// A fresh directory under the test's temporary directory, removed with its
// contents on destruction. Thread-compatible.
#ifndef STOKER_TESTS_TESTDATA_TEMP_DIR_H_
#define STOKER_TESTS_TESTDATA_TEMP_DIR_H_

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

namespace stoker::testing {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const char* base = std::getenv("TEST_TMPDIR");
    path_ = std::filesystem::path(base ? base : "/tmp") /
            ("stoker_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `bytes` to path()/relative, creating directories.
  std::filesystem::path Write(const std::string& relative, const std::string& bytes) const {
    const std::filesystem::path p = path_ / relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_TEMP_DIR_H_
