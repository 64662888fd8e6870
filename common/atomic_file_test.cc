#include "common/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(AtomicFileTest, WritesReplacesAndLeavesNoTemporaryFile) {
  const fs::path dir = fs::temp_directory_path() / absl::StrCat("stoker_atomic_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path file = dir / "index";
  ASSERT_TRUE(WriteFileAtomically(file, "first").ok());
  EXPECT_EQ(Read(file), "first");
  ASSERT_TRUE(WriteFileAtomically(file, std::string(1 << 20, 'x'), Durability::kDurable).ok());
  EXPECT_EQ(Read(file), std::string(1 << 20, 'x'));
  struct stat st;
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "readable by other servers sharing the directory";
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) entries += e.path() != file;
  EXPECT_EQ(entries, 0) << "a temporary file was left behind";
  // No directory to write in: FAILED_PRECONDITION, nothing made.
  const absl::Status missing = WriteFileAtomically(dir / "no-such-dir" / "index", "x");
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition) << missing;
  EXPECT_NE(missing.message().find("no-such-dir"), std::string::npos) << missing;
  EXPECT_FALSE(FsyncPath(dir / "absent").ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace stoker
