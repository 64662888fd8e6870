#include "dataplane/memory_budget.h"

#include <fstream>

#include "gtest/gtest.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TempDir;

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

TEST(MemoryBudgetTest, CgroupV2LimitOfTheProcesssOwnCgroup) {
  TempDir dir;
  const std::string root = dir.path().string();
  const std::string fs = root + "/cgroup";
  std::filesystem::create_directories(fs + "/system.slice/stoker-server.service");
  Write(root + "/self", "0::/system.slice/stoker-server.service\n");
  Write(fs + "/system.slice/stoker-server.service/memory.max", "17179869184\n");
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/self", fs), int64_t{16} << 30);
  // The budget is half of the smaller of the machine's memory and the limit.
  EXPECT_LE(MemoryBudget::DefaultLimit(root + "/self", fs), int64_t{8} << 30);
  Write(fs + "/system.slice/stoker-server.service/memory.max", "max\n");
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/self", fs), 0);
}

TEST(MemoryBudgetTest, CgroupV1MemoryControllerAmongOthers) {
  TempDir dir;
  const std::string root = dir.path().string();
  const std::string fs = root + "/cgroup";
  std::filesystem::create_directories(fs + "/memory/kubepods/pod1");
  Write(root + "/self", "4:cpu,cpuacct:/kubepods/pod1\n3:memory:/kubepods/pod1\n");
  Write(fs + "/memory/kubepods/pod1/memory.limit_in_bytes", "1073741824\n");
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/self", fs), int64_t{1} << 30);
  EXPECT_EQ(MemoryBudget::DefaultLimit(root + "/self", fs), int64_t{1} << 29);
  Write(fs + "/memory/kubepods/pod1/memory.limit_in_bytes", "9223372036854771712\n");  // v1 "unlimited"
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/self", fs), 0);
}

TEST(MemoryBudgetTest, NoCgroupMeansTheMachinesMemory) {
  TempDir dir;
  const std::string root = dir.path().string();
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/missing", root), 0);
  Write(root + "/self", "garbage without colons\n0::/nowhere\n");
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/self", root), 0);
  EXPECT_GT(MemoryBudget::DefaultLimit(root + "/self", root), 0);
}

}  // namespace
}  // namespace stoker
