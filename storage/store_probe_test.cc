#include "storage/store_probe.h"

#include "gtest/gtest.h"
#include "storage/local_storage.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TempDir;

TEST(StoreProbeTest, ReadsTheBytesAskedForSpreadOverTheDataset) {
  TempDir dir;
  for (int i = 0; i < 10; ++i) dir.Write("store/ds/shard-" + std::to_string(i) + ".tar", std::string(1000, 'x'));
  dir.Write("store/ds2/other.tar", std::string(5000, 'y'));  // a sibling the listing of "ds" may return
  auto store = OpenLocalStorage((dir.path() / "store").string());
  ASSERT_TRUE(store.ok());
  BlockFetchOptions fetch;
  fetch.block_bytes = 256;
  fetch.parallel = 3;

  auto p = ProbeStore(**store, "ds", 3000, fetch);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->dataset_objects, 10);
  EXPECT_EQ(p->dataset_bytes, 10000);
  EXPECT_EQ(p->objects_read, 3) << "shards 0, 2 and 4: 3,000 bytes";
  EXPECT_EQ(p->bytes_read, 3000);
  EXPECT_GT(p->seconds, 0);
  EXPECT_GT(p->bytes_per_second(), 0);
  EXPECT_NEAR(p->copy_seconds(), p->seconds * 10000 / 3000, 1e-9);

  auto all = ProbeStore(**store, "ds", int64_t{1} << 30, fetch);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->objects_read, 10) << "a bound above the dataset reads it all, once";

  auto bounded = ProbeStore(**store, "ds2", 1200, fetch);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_EQ(bounded->objects_read, 1);
  EXPECT_EQ(bounded->bytes_read, 1200) << "an object over the bound is read only that far";
  EXPECT_EQ(bounded->dataset_bytes, 5000);

  EXPECT_EQ(ProbeStore(**store, "missing", 3000, fetch).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace stoker
