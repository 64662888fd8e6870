// OUT.partial's durable state read back with care: settings that cannot be
// read stop the run (and keep the shards), a record whose shard lost bytes is
// no record, and placing swaps a finished output in for an old one.
#include "materialize/work_dir.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

class WorkDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("work_dir_test_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  static void Write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
  static std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path root_;
};

TEST_F(WorkDirTest, SettingsRoundTripAndUnreadableOnesStopTheRun) {
  WorkDir dir(root_ / "out/");
  EXPECT_EQ(dir.out(), root_ / "out");
  EXPECT_EQ(dir.path(), fs::path((root_ / "out").string() + ".partial"));
  ASSERT_TRUE(dir.ReadJob().ok());
  EXPECT_FALSE(dir.ReadJob()->has_value());  // a new run
  ASSERT_TRUE(dir.Clear().ok());
  const MaterializeJob job{"fp", "center_crop(8)", "jpeg", 10, 4};
  ASSERT_TRUE(dir.WriteJob(job).ok());
  absl::StatusOr<std::optional<MaterializeJob>> back = dir.ReadJob();
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status();
  EXPECT_EQ((*back)->Differs(job), "");
  MaterializeJob other = job;
  other.prefix = "center_crop(16)";
  EXPECT_NE(other.Differs(**back).find("--prefix ('center_crop(8)' then, 'center_crop(16)' now)"), std::string::npos);

  Write(dir.path() / "shard-000000.tar", "kept");
  Write(dir.path() / "job.json", "{not json");
  const absl::Status unreadable = dir.ReadJob().status();
  EXPECT_TRUE(absl::IsFailedPrecondition(unreadable)) << unreadable;
  EXPECT_NE(unreadable.message().find("cannot read the interrupted run's settings"), std::string::npos);
  EXPECT_EQ(Read(dir.path() / "shard-000000.tar"), "kept");  // nothing wiped
}

TEST_F(WorkDirTest, ARecordHoldsOnlyWhileItsShardHasTheRecordedSize) {
  WorkDir dir(root_ / "out");
  ASSERT_TRUE(dir.Clear().ok());
  ShardRecord r;
  r.shard = {"shard-000001.tar", 3, 5, "abc"};
  r.begin = 4;
  r.end = 8;
  r.failed.push_back({6, "a/b.jpg", "corrupt"});
  r.fields = {"txt"};
  Write(dir.path() / r.shard.name, "12345");
  ASSERT_TRUE(dir.WriteRecord(r).ok());
  std::optional<ShardRecord> back = dir.LoadRecord("shard-000001.tar", 4, 8);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->shard.samples, 3);
  EXPECT_EQ(back->failed.at(0).reason, "corrupt");
  EXPECT_EQ(back->fields.count("txt"), 1u);
  EXPECT_FALSE(dir.LoadRecord("shard-000001.tar", 4, 9).has_value());  // another shard size
  Write(dir.path() / r.shard.name, "1234");                            // lost a byte
  EXPECT_FALSE(dir.LoadRecord("shard-000001.tar", 4, 8).has_value());
  Write(dir.path() / "shard-000002.tar.tmp", "cut short");
  dir.DropUnfinishedShards();
  EXPECT_FALSE(fs::exists(dir.path() / "shard-000002.tar.tmp"));
}

TEST_F(WorkDirTest, PlacingMovesOrSwapsTheOutputAndTheLockKeepsASecondRunOut) {
  WorkDir first(root_ / "out");
  ASSERT_TRUE(first.Lock().ok());
  WorkDir second(root_ / "out");
  const absl::Status locked = second.Lock();
  EXPECT_TRUE(absl::IsFailedPrecondition(locked)) << locked;
  EXPECT_NE(locked.message().find("another stoker-materialize is writing"), std::string::npos);

  ASSERT_TRUE(first.Clear().ok());
  ASSERT_TRUE(first.WriteJob({"fp", "", "jpeg", 1, 1}).ok());
  Write(first.path() / "new", "1");
  ASSERT_TRUE(first.Place().ok());
  EXPECT_EQ(Read(root_ / "out" / "new"), "1");
  EXPECT_FALSE(fs::exists(root_ / "out" / "job.json"));
  EXPECT_FALSE(fs::exists(first.path()));

  ASSERT_TRUE(first.Clear().ok());
  Write(first.path() / "newer", "2");
  ASSERT_TRUE(first.Place().ok());  // OUT exists: swapped in, the old one deleted
  EXPECT_EQ(Read(root_ / "out" / "newer"), "2");
  EXPECT_FALSE(fs::exists(root_ / "out" / "new"));
  EXPECT_FALSE(fs::exists(first.path()));
  first.Unlock();
  EXPECT_TRUE(second.Lock().ok());
}

}  // namespace
}  // namespace stoker
