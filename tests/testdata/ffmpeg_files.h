// Media files made by Debian's ffmpeg tool from its lavfi sources, for the
// audio and video tests: each made in a temporary folder of its own and
// returned as bytes. Thread-compatible.
#ifndef STOKER_TESTS_TESTDATA_FFMPEG_FILES_H_
#define STOKER_TESTS_TESTDATA_FFMPEG_FILES_H_

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker::testing {

// Whether the ffmpeg tool runs here (deploy/install-deps.sh installs it).
inline bool HaveFfmpeg() { return std::system("ffmpeg -version >/dev/null 2>&1") == 0; }

// The file `ffmpeg -v error -y ARGS OUT` writes, OUT being `name` (its
// extension picks the container); an ffmpeg failure fails the test.
inline std::string MadeByFfmpeg(const std::string& args, const std::string& name) {
  static std::atomic<int> calls{0};
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / absl::StrCat("stoker_ffmpeg_", getpid(), "_", calls++);
  std::filesystem::create_directories(dir);
  const std::filesystem::path out = dir / name;
  const std::string cmd = absl::StrCat("ffmpeg -v error -y ", args, " ", out.string(), " </dev/null");
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove_all(dir);
  return bytes;
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_FFMPEG_FILES_H_
