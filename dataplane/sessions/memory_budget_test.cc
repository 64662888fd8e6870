#include "dataplane/sessions/memory_budget.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TempDir;

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(MemoryBudgetTest, CgroupV2LimitOfTheProcesssOwnCgroup) {
  TempDir dir;
  const std::string root = dir.path().string();
  const std::string fs = root + "/cgroup";
  std::filesystem::create_directories(fs + "/system.slice/stoker-server.service");
  Write(root + "/self", "0::/system.slice/stoker-server.service\n");
  Write(fs + "/system.slice/stoker-server.service/memory.max", "17179869184\n");
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/self", fs), int64_t{16} << 30);
  // The budget is half of the smaller of the machine's memory and the limit.
  EXPECT_LE(MemoryBudget::DefaultLimit(MemoryBudget::ProcessLimits::Read(root + "/self", fs)), int64_t{8} << 30);
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
  EXPECT_EQ(MemoryBudget::DefaultLimit(MemoryBudget::ProcessLimits::Read(root + "/self", fs)), int64_t{1} << 29);
  Write(fs + "/memory/kubepods/pod1/memory.limit_in_bytes", "9223372036854771712\n");  // v1 "unlimited"
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/self", fs), 0);
}

TEST(MemoryBudgetTest, NoCgroupMeansTheMachinesMemory) {
  TempDir dir;
  const std::string root = dir.path().string();
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/missing", root), 0);
  Write(root + "/self", "garbage without colons\n0::/nowhere\n");
  EXPECT_EQ(MemoryBudget::CgroupLimit(root + "/self", root), 0);
  EXPECT_GT(MemoryBudget::DefaultLimit(MemoryBudget::ProcessLimits::Read(root + "/self", root)), 0);
}

TEST(MemoryBudgetTest, TheTightestLimitDecidesAndRlimitsCountWhatIsAlreadyMapped) {
  MemoryBudget::ProcessLimits l;
  l.physical = int64_t{64} << 30;
  std::string which;
  EXPECT_EQ(MemoryBudget::DefaultLimit(l, &which), int64_t{32} << 30);
  EXPECT_EQ(which, "the machine's memory");
  l.cgroup = int64_t{16} << 30;
  EXPECT_EQ(MemoryBudget::DefaultLimit(l, &which), int64_t{8} << 30);
  EXPECT_EQ(which, "the cgroup's memory limit");
  // prlimit --as=8GiB on a process that already maps 1 GiB: half of 7 GiB.
  l.address_space = int64_t{8} << 30;
  l.address_space_used = int64_t{1} << 30;
  EXPECT_EQ(MemoryBudget::DefaultLimit(l, &which), int64_t{7} << 29);
  EXPECT_EQ(which, "what RLIMIT_AS leaves");
  l.data = int64_t{4} << 30;
  l.data_used = int64_t{2} << 30;
  EXPECT_EQ(MemoryBudget::DefaultLimit(l, &which), int64_t{1} << 30);
  EXPECT_EQ(which, "what RLIMIT_DATA leaves");
  // Already past a limit: the smallest budget there is, never a negative one.
  l.address_space_used = int64_t{9} << 30;
  EXPECT_EQ(MemoryBudget::DefaultLimit(l, &which), 1);
}

TEST(MemoryBudgetTest, ReadsThisProcesssAddressSpaceLimitAndUse) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  // 1 TiB above what the process maps now (a sanitizer's shadow maps tens
  // of TiB): changes nothing else while it is set.
  int64_t mapped = 0;
  {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("VmSize:", 0) == 0) mapped = std::stoll(line.substr(7)) * 1024;
    }
  }
  ASSERT_GT(mapped, 0);
  const rlim_t limit = static_cast<rlim_t>(mapped) + (rlim_t{1} << 40);
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < limit) GTEST_SKIP() << "hard RLIMIT_AS too low";
  rlimit set = saved;
  set.rlim_cur = limit;
  ASSERT_EQ(setrlimit(RLIMIT_AS, &set), 0);
  const MemoryBudget::ProcessLimits l = MemoryBudget::ProcessLimits::Read();
  ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
  EXPECT_EQ(l.address_space, static_cast<int64_t>(limit));
  EXPECT_GE(l.address_space_used, mapped / 2);  // VmSize now, about what it was
  EXPECT_LT(l.address_space_used, l.address_space);
  EXPECT_GT(l.physical, 0);
}

}  // namespace
}  // namespace stoker
