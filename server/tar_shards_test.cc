#include "server/tar_shards.h"

#include <fstream>
#include <thread>

#include "gtest/gtest.h"
#include "server/dataset.h"
#include "server/synthetic_source.h"
#include "tests/testdata/tar_writer.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TarArchive;
using ::stoker::testing::TempDir;

TEST(TarShardsTest, GroupsMembersIntoSamplesAcrossShardsInOrder) {
  TempDir dir;
  dir.Write("ds/train-000001.tar", TarArchive({{"c.jpg", "C"}, {"c.cls", "2"}}));
  dir.Write("ds/train-000000.tar", TarArchive({{"a.jpg", "AAA"},
                                               {"a.cls", "1\n"},
                                               {"a.json", "{}"},
                                               {"sub/b.seg.png", "BB"},  // key "sub/b", field "seg.png": no image
                                               {"sub/b.webp", "W"},
                                               {"sub/b.cls", "0"},
                                               {"nolabel.jpeg", "N"},
                                               {"onlymeta.json", "{}"}}));
  auto source = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(source.ok()) << source.status();
  const SampleSource& s = **source;
  ASSERT_EQ(s.size(), 4);  // a, sub/b, nolabel; c (onlymeta has no image)
  EXPECT_EQ(s.Describe(0), "train-000000.tar:a");
  EXPECT_EQ(*s.Read(0), "AAA");
  EXPECT_EQ(s.label(0), 1);
  EXPECT_EQ(s.Describe(1), "train-000000.tar:sub/b");
  EXPECT_EQ(*s.Read(1), "W");
  EXPECT_EQ(s.label(1), 0);
  EXPECT_EQ(s.label(2), 0);  // no .cls: label 0
  EXPECT_EQ(s.Describe(3), "train-000001.tar:c");
  EXPECT_EQ(*s.Read(3), "C");
  EXPECT_EQ(s.label(3), 2);
  EXPECT_EQ(s.class_names().size(), 3u);
  EXPECT_TRUE((*source)->damage().empty());
}

TEST(TarShardsTest, LongNamesAndPaddingAreHandled) {
  TempDir dir;
  const std::string long_key = std::string(120, 'k');
  dir.Write("ds/s.tar", TarArchive({{long_key + ".jpg", std::string(1000, 'x')}, {"z.jpg", "Z"}}));
  auto source = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_EQ((*source)->size(), 2);
  EXPECT_EQ((*source)->Describe(0), "s.tar:" + long_key);
  EXPECT_EQ((*source)->Read(0)->size(), 1000u);
  EXPECT_EQ(*(*source)->Read(1), "Z");
}

TEST(TarShardsTest, SidecarIndexIsWrittenReusedAndRebuiltWhenTheShardChanges) {
  TempDir dir;
  const auto shard = dir.Write("ds/s.tar", TarArchive({{"a.jpg", "A"}, {"a.cls", "3"}}));
  ASSERT_TRUE(TarShardSource::Open(dir.path() / "ds").ok());
  const std::filesystem::path sidecar = shard.string() + ".stoker-index";
  ASSERT_TRUE(std::filesystem::exists(sidecar));
  // A planted sidecar for the same shard state is trusted (no rescan).
  std::ifstream in(sidecar);
  std::string header, damage;
  std::getline(in, header);
  std::getline(in, damage);
  in.close();
  std::ofstream(sidecar) << header << "\n" << damage << "\nplanted\t512\t1\t7\n";
  auto reused = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(reused.ok());
  EXPECT_EQ((*reused)->Describe(0), "s.tar:planted");
  EXPECT_EQ((*reused)->label(0), 7);
  // Changing the shard invalidates it.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  dir.Write("ds/s.tar", TarArchive({{"b.jpg", "B"}, {"c.jpg", "C"}}));
  auto rebuilt = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(rebuilt.ok());
  ASSERT_EQ((*rebuilt)->size(), 2);
  EXPECT_EQ((*rebuilt)->Describe(0), "s.tar:b");
}

TEST(TarShardsTest, DamageIsReportedAndEarlierSamplesStayUsable) {
  TempDir dir;
  const std::string good = TarArchive({{"a.jpg", "A"}, {"b.jpg", std::string(2000, 'b')}, {"c.jpg", "C"}});
  // Truncated inside b's data: header of b at 1024, its data runs to 1536 + 2000.
  dir.Write("t/s.tar", good.substr(0, 1024 + 512 + 700));
  auto truncated = TarShardSource::Open(dir.path() / "t");
  ASSERT_TRUE(truncated.ok()) << truncated.status();
  EXPECT_EQ((*truncated)->size(), 1);
  ASSERT_EQ((*truncated)->damage().size(), 1u);
  EXPECT_NE((*truncated)->damage()[0].find("s.tar: truncated member at offset 1024"), std::string::npos)
      << (*truncated)->damage()[0];

  std::string corrupt = good;
  corrupt[1024 + 148] ^= 1;  // b's header checksum
  dir.Write("m/s.tar", corrupt);
  auto malformed = TarShardSource::Open(dir.path() / "m");
  ASSERT_TRUE(malformed.ok());
  EXPECT_EQ((*malformed)->size(), 1);
  EXPECT_NE((*malformed)->damage()[0].find("malformed tar header at offset 1024"), std::string::npos);

  dir.Write("n/s.tar", std::string(700, 'x'));  // not a tar at all
  auto none = TarShardSource::Open(dir.path() / "n");
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
}

TEST(TarShardsTest, CatalogPicksTheSourceByWhatTheDirectoryHolds) {
  TempDir dir;
  dir.Write("shards/s.tar", TarArchive({{"a.jpg", "A"}}));
  dir.Write("folder/cls/a.jpg", "A");
  DatasetCatalog catalog(dir.path());
  auto shards = catalog.Open("shards");
  auto folder = catalog.Open("folder");
  auto synthetic = catalog.Open("synthetic:64x48:100:10");
  ASSERT_TRUE(shards.ok() && folder.ok() && synthetic.ok());
  EXPECT_EQ((*shards)->Describe(0), "s.tar:a");
  EXPECT_EQ((*folder)->Describe(0), "cls/a.jpg");
  EXPECT_EQ((*synthetic)->size(), 100);
  EXPECT_EQ((*synthetic)->label(13), 3);
  EXPECT_EQ(catalog.Open("synthetic:64").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(catalog.Open("synthetic:0x5").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stoker
