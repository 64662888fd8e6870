// Test helper: a real stoker-server process on 127.0.0.1 with a free port,
// started with extra flags; its address once it says it is listening.
#ifndef STOKER_TESTS_TESTDATA_SERVER_PROCESS_H_
#define STOKER_TESTS_TESTDATA_SERVER_PROCESS_H_

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testdata/subprocess.h"

namespace stoker::testing {

struct RunningServer {
  std::unique_ptr<Subprocess> process;
  std::string address;  // 127.0.0.1:port
};

// `prefix`: a command the server runs under (e.g. prlimit and its flags).
inline RunningServer StartServerProcess(const std::string& binary, const std::filesystem::path& root,
                                        const std::vector<std::string>& flags,
                                        const std::vector<std::string>& prefix = {}) {
  std::vector<std::string> argv = prefix;
  for (const std::string& a : {binary, std::string("--host=127.0.0.1"), std::string("--port=0"),
                               std::string("--metrics-port=-1"), "--data-root=" + root.string()}) {
    argv.push_back(a);
  }
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto p = Subprocess::Start(argv);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  auto line = (*p)->WaitForLine("listening on", absl::Seconds(20));
  EXPECT_TRUE(line.ok()) << line.status();
  auto port = line.ok() ? PortFromLine(*line) : absl::StatusOr<int>(line.status());
  EXPECT_TRUE(port.ok()) << port.status();
  return {*std::move(p), port.ok() ? absl::StrCat("127.0.0.1:", *port) : std::string()};
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_SERVER_PROCESS_H_
