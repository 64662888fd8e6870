#include "storage/store_mirror.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/local_storage.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

using ::stoker::testing::TempDir;

std::string Read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A local directory standing for a remote store, counting what is read; the
// ETag is the size and mtime (as a store's would change with the content).
class CountingStore final : public Storage {
 public:
  explicit CountingStore(std::unique_ptr<Storage> inner) : inner_(std::move(inner)) {}
  std::string root() const override { return "test://" + inner_->root(); }
  std::string Describe(absl::string_view key) const override { return "test://" + std::string(key); }
  absl::StatusOr<ObjectInfo> Stat(absl::string_view key) override { return Tagged(inner_->Stat(key)); }
  absl::StatusOr<std::vector<ObjectInfo>> List(absl::string_view prefix) override {
    ++lists;
    auto l = inner_->List(prefix);
    if (l.ok()) {
      for (ObjectInfo& o : *l) o = *Tagged(o);
    }
    return l;
  }
  absl::StatusOr<std::string> ListingVersion(absl::string_view) override { return listing_version; }
  absl::Status ReadRange(const ObjectInfo& o, int64_t offset, int64_t length, std::string* out) override {
    ++reads;
    if (on_read) on_read();
    return inner_->ReadRange(o, offset, length, out);
  }
  std::function<void()> on_read;  // set before the reads begin
  std::atomic<int> reads{0};
  std::atomic<int> lists{0};
  std::string listing_version;  // "" as S3's (none)

 private:
  static absl::StatusOr<ObjectInfo> Tagged(absl::StatusOr<ObjectInfo> o) {
    if (o.ok()) o->etag = std::to_string(o->size) + "-" + std::to_string(o->mtime_ns);
    return o;
  }
  std::unique_ptr<Storage> inner_;
};

class StoreMirrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("store/ds/a/1.jpg", std::string(100, 'a'));
    dir_.Write("store/ds/b/2.jpg", std::string(3000, 'b'));
    dir_.Write("store/ds/shard-000000.tar", std::string(20000, 't'));
    dir_.Write("store/other/x.bin", std::string(50000, 'x'));
    dir_.Write("store/ann.json", "{}");
  }

  std::unique_ptr<StoreMirror> Mirror(int64_t cache_bytes, CountingStore** store) {
    auto inner = OpenLocalStorage((dir_.path() / "store").string());
    EXPECT_TRUE(inner.ok());
    auto counting = std::make_unique<CountingStore>(*std::move(inner));
    *store = counting.get();
    MirrorOptions o;
    o.cache_dir = dir_.path() / "cache";
    o.cache_bytes = cache_bytes;
    o.block_bytes = 4096;
    o.parallel = 3;
    auto m = StoreMirror::Create(std::move(counting), o);
    EXPECT_TRUE(m.ok()) << m.status();
    return *std::move(m);
  }

  TempDir dir_;
};

TEST_F(StoreMirrorTest, FetchesOnceInLargeReadsAndAgainOnlyWhatChanged) {
  CountingStore* store;
  auto mirror = Mirror(1 << 20, &store);
  ASSERT_TRUE(mirror->Ensure("ds", true).ok());
  EXPECT_EQ(Read(mirror->local_root() / "ds/b/2.jpg"), std::string(3000, 'b'));
  EXPECT_EQ(Read(mirror->local_root() / "ds/shard-000000.tar"), std::string(20000, 't'));
  EXPECT_EQ(store->reads.load(), 1 + 1 + 5) << "one read per 4 KiB block of each object";
  EXPECT_EQ(mirror->stats().bytes_cached, 23100);
  ASSERT_TRUE(mirror->Ensure("ds", true).ok());
  EXPECT_EQ(store->lists.load(), 1) << "a name this process fetched is not listed again";
  ASSERT_TRUE(mirror->Ensure("ann.json", false).ok());
  EXPECT_EQ(Read(mirror->local_root() / "ann.json"), "{}");

  // A restarted server: the cache is reused; a changed and a removed object
  // are fetched again and removed; nothing else is read.
  mirror.reset();
  dir_.Write("store/ds/b/2.jpg", std::string(3001, 'c'));
  fs::remove(dir_.path() / "store/ds/a/1.jpg");
  auto again = Mirror(1 << 20, &store);
  ASSERT_TRUE(again->Ensure("ds", true).ok());
  EXPECT_EQ(store->reads.load(), 1);
  EXPECT_EQ(Read(again->local_root() / "ds/b/2.jpg"), std::string(3001, 'c'));
  EXPECT_FALSE(fs::exists(again->local_root() / "ds/a/1.jpg"));
  EXPECT_EQ(again->stats().objects_reused, 1);
}

TEST_F(StoreMirrorTest, ProgressSaysWhatIsBeingCopiedWhileItIs) {
  dir_.Write("store/big/a.bin", std::string(1500000, 'a'));
  dir_.Write("store/big/b.bin", std::string(1500000, 'b'));
  CountingStore* store;
  auto mirror = Mirror(8 << 20, &store);
  EXPECT_EQ(mirror->Progress("big"), "");
  absl::Mutex mu;
  std::vector<double> done;  // MB copied, as each read saw it
  std::vector<std::string> bad, other;
  store->on_read = [&] {
    const std::string p = mirror->Progress("big");
    double mb = -1;
    const bool ok = absl::StartsWith(p, "test://big: ") && p.find(" of 3.0 MB copied (") != std::string::npos &&
                    absl::SimpleAtod(p.substr(12, p.find(" of ") - 12), &mb);
    absl::MutexLock lock(&mu);
    if (ok) {
      done.push_back(mb);
    } else {
      bad.push_back(p);
    }
    if (other.empty()) other.push_back(mirror->Progress("ds"));
  };
  ASSERT_TRUE(mirror->Ensure("big", true).ok());
  EXPECT_TRUE(bad.empty()) << bad.front();
  ASSERT_GT(done.size(), 100u) << "one read per 4 KiB block";
  EXPECT_EQ(*std::min_element(done.begin(), done.end()), 0.0);
  EXPECT_GE(*std::max_element(done.begin(), done.end()), 2.9) << "the count rises as blocks land";
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0], "waiting for the copy of test://big to end");
  EXPECT_EQ(mirror->Progress("big"), "") << "nothing is being copied once Ensure returned";
  EXPECT_FALSE(mirror->Ensure("missing", true).ok());
  EXPECT_EQ(mirror->Progress("missing"), "") << "nor once it failed";
  EXPECT_GT(mirror->stats().ensure_seconds, 0);
}

TEST_F(StoreMirrorTest, ARestartWithTheSameListingVersionDoesNotListAgain) {
  CountingStore* store;
  auto mirror = Mirror(1 << 20, &store);
  store->listing_version = "v1";
  ASSERT_TRUE(mirror->Ensure("ds", true).ok());
  EXPECT_EQ(store->lists.load(), 1);
  mirror.reset();

  auto again = Mirror(1 << 20, &store);
  store->listing_version = "v1";
  ASSERT_TRUE(again->Ensure("ds", true).ok());
  EXPECT_EQ(store->lists.load(), 0) << "the cached listing stands";
  EXPECT_EQ(store->reads.load(), 0);
  EXPECT_EQ(again->stats().objects_reused, 3);
  again.reset();

  // The listing changed (an object added): listed and fetched again.
  dir_.Write("store/ds/c/3.jpg", std::string(10, 'c'));
  auto third = Mirror(1 << 20, &store);
  store->listing_version = "v2";
  ASSERT_TRUE(third->Ensure("ds", true).ok());
  EXPECT_EQ(store->lists.load(), 1);
  EXPECT_EQ(Read(third->local_root() / "ds/c/3.jpg"), std::string(10, 'c'));
  EXPECT_EQ(third->stats().objects_fetched, 1);
  third.reset();

  // No version (S3): listed at every restart.
  auto fourth = Mirror(1 << 20, &store);
  ASSERT_TRUE(fourth->Ensure("ds", true).ok());
  EXPECT_EQ(store->lists.load(), 1);
}

TEST_F(StoreMirrorTest, ACachedListingThatNamesAGoneVersionIsListedAgain) {
  CountingStore* store;
  auto mirror = Mirror(1 << 20, &store);
  store->listing_version = "v1";
  ASSERT_TRUE(mirror->Ensure("ds", true).ok());
  const fs::path local = mirror->local_root();
  mirror.reset();
  // The object changes in the store, the index does not; the local copy is lost.
  dir_.Write("store/ds/b/2.jpg", std::string(2000, 'n'));
  fs::remove(local / "ds/b/2.jpg");
  auto again = Mirror(1 << 20, &store);
  store->listing_version = "v1";
  const absl::Status s = again->Ensure("ds", true);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(store->lists.load(), 1) << "listed again after the pinned read failed";
  EXPECT_EQ(Read(again->local_root() / "ds/b/2.jpg"), std::string(2000, 'n'));
}

TEST_F(StoreMirrorTest, EvictingAnEarlierRunsDatasetKeepsAnObjectInsideItThatThisRunUses) {
  CountingStore* store;
  auto mirror = Mirror(1 << 20, &store);
  ASSERT_TRUE(mirror->Ensure("ds", true).ok());
  mirror.reset();
  // A new run uses one object inside "ds" (as a tokenizer model), then needs
  // the room "ds" holds.
  auto again = Mirror(50000 + 100 + 10, &store);
  ASSERT_TRUE(again->Ensure("ds/a/1.jpg", false).ok());
  ASSERT_TRUE(again->Ensure("other", true).ok());
  EXPECT_GT(again->stats().evicted_bytes, 0);
  EXPECT_FALSE(fs::exists(again->local_root() / "ds/b/2.jpg"));
  EXPECT_EQ(Read(again->local_root() / "ds/a/1.jpg"), std::string(100, 'a'));
}

TEST_F(StoreMirrorTest, ATornCopyIsNeverServedAndIsFetchedAgain) {
  CountingStore* store;
  auto mirror = Mirror(1 << 20, &store);
  ASSERT_TRUE(mirror->Ensure("ds", true).ok());
  const fs::path local = mirror->local_root();
  mirror.reset();
  // What a SIGKILL mid-fetch leaves: a shorter file (a later rewrite) and a part file.
  const std::string copy = fs::relative(local, dir_.path()).string();
  dir_.Write(copy + "/ds/shard-000000.tar", std::string(7, 't'));
  dir_.Write(copy + "/ds/shard-000000.tar.stoker-part", "junk");
  auto again = Mirror(1 << 20, &store);
  ASSERT_TRUE(again->Ensure("ds", true).ok());
  EXPECT_EQ(Read(local / "ds/shard-000000.tar"), std::string(20000, 't'));
  EXPECT_EQ(store->reads.load(), 5);
}

TEST_F(StoreMirrorTest, TheBoundEvictsEarlierRunsNamesButNeverOpenOnes) {
  CountingStore* store;
  auto mirror = Mirror(60000, &store);
  ASSERT_TRUE(mirror->Ensure("other", true).ok());
  // 23,100 + 50,000 > 60,000 and "other" is open: the shard stays in the
  // store, and at 20,000 bytes it cannot be held beside "other" either.
  ASSERT_TRUE(mirror->Ensure("ds", true).ok());
  ASSERT_EQ(mirror->Streamed("ds").size(), 1u);
  absl::StatusOr<std::shared_ptr<const HeldObject>> full = mirror->Hold("ds/shard-000000.tar");
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_TRUE(absl::StrContains(full.status().message(), "--cache-bytes=60000")) << full.status();
  mirror.reset();
  auto next_run = Mirror(60000, &store);  // "other" is from an earlier run now
  ASSERT_TRUE(next_run->Ensure("ds", true).ok());
  EXPECT_FALSE(fs::exists(next_run->local_root() / "other/x.bin"));
  EXPECT_EQ(next_run->stats().evicted_bytes, 50000);
  EXPECT_EQ(next_run->stats().bytes_cached, 23100);
}

std::string HeldBytes(const HeldObject& held) {
  std::string bytes(static_cast<size_t>(held.info().size), '\0');
  EXPECT_EQ(pread(held.fd(), bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  return bytes;
}

TEST_F(StoreMirrorTest, ShardsThatDoNotFitStayInTheStoreAndAreFetchedWhenHeldLeastRecentlyUsedOut) {
  for (int i = 0; i < 3; ++i) dir_.Write("store/big/s-" + std::to_string(i) + ".tar", std::string(20000, 'A' + i));
  dir_.Write("store/big/manifest.json", "{}");
  dir_.Write("store/big/sub/deep.tar", std::string(100, 'd'));  // not a shard of "big": copied whole
  CountingStore* store;
  auto mirror = Mirror(45000, &store);  // 2 of the 3 shards fit
  ASSERT_TRUE(mirror->Ensure("big", true).ok());
  const std::vector<ObjectInfo> streamed = mirror->Streamed("big");
  ASSERT_EQ(streamed.size(), 3u);
  EXPECT_EQ(streamed[0].key, "big/s-0.tar");
  EXPECT_TRUE(mirror->Streamed("ds").empty());
  EXPECT_EQ(Read(mirror->local_root() / "big/manifest.json"), "{}");
  EXPECT_TRUE(fs::exists(mirror->local_root() / "big/sub/deep.tar"));
  EXPECT_FALSE(fs::exists(mirror->local_root() / "big/s-0.tar"));
  const int reads_before = store->reads.load();
  fs::path s0, s1;
  {
    auto a = mirror->Hold("big/s-0.tar");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(HeldBytes(**a), std::string(20000, 'A'));
    s0 = (*a)->path();
    EXPECT_TRUE(fs::exists(s0));
    EXPECT_FALSE(fs::exists(mirror->local_root() / "big/s-0.tar")) << "not where the dataset's files are";
    EXPECT_EQ(store->reads.load() - reads_before, 5) << "one ranged read per 4 KiB block";
    auto again = mirror->Hold("big/s-0.tar");  // held twice: one copy
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(store->reads.load() - reads_before, 5);
    auto b = mirror->Hold("big/s-1.tar");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(HeldBytes(**b), std::string(20000, 'B'));
    s1 = (*b)->path();
  }
  ASSERT_TRUE(mirror->Hold("big/s-1.tar").ok());  // s-0 is now the least recently used
  ASSERT_TRUE(mirror->Hold("big/s-2.tar").ok());
  EXPECT_FALSE(fs::exists(s0)) << "evicted for s-2";
  EXPECT_TRUE(fs::exists(s1));
  auto c = mirror->Hold("big/s-2.tar");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(HeldBytes(**c), std::string(20000, 'C'));
  const MirrorStats stats = mirror->stats();
  EXPECT_EQ(stats.streamed_fetches, 3);
  EXPECT_EQ(stats.streamed_hits, 3);
  EXPECT_EQ(stats.evicted_bytes, 20000);
  EXPECT_EQ(mirror->Hold("big/manifest.json").status().code(), absl::StatusCode::kNotFound);
  c->reset();  // a HeldObject never outlives its mirror

  // The mirror's streamed copies go with it; a crashed process's (its
  // folder named for a pid no longer running) with the next mirror.
  mirror.reset();
  EXPECT_FALSE(fs::exists(s1)) << "a mirror removes its streamed copies when it goes";
  const fs::path crashed = s1.parent_path().parent_path().parent_path() / "stream-2147483000" / "big/s-1.tar";
  dir_.Write(fs::relative(crashed, dir_.path()).string(), "torn");
  ASSERT_TRUE(fs::exists(crashed));
  auto next = Mirror(45000, &store);
  EXPECT_FALSE(fs::exists(crashed));
}

TEST_F(StoreMirrorTest, AHeldShardIsNeverEvictedAndAWaiterGetsItsRoomOnRelease) {
  for (int i = 0; i < 2; ++i) dir_.Write("store/big/s-" + std::to_string(i) + ".tar", std::string(20000, 'A' + i));
  CountingStore* store;
  auto mirror = Mirror(30000, &store);
  ASSERT_TRUE(mirror->Ensure("big", true).ok());
  auto a = mirror->Hold("big/s-0.tar");
  ASSERT_TRUE(a.ok());
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto b = mirror->Hold("big/s-1.tar");
    EXPECT_TRUE(b.ok()) << b.status();
    if (b.ok()) EXPECT_EQ(HeldBytes(**b), std::string(20000, 'B'));
    got = true;
  });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(got.load()) << "s-0 is held: there is no room for s-1 yet";
  EXPECT_EQ(HeldBytes(**a), std::string(20000, 'A'));
  a->reset();
  waiter.join();
  EXPECT_TRUE(got.load());
  std::atomic<bool> cancelled{true};
  EXPECT_EQ(mirror->Hold("big/s-0.tar", &cancelled).status().code(), absl::StatusCode::kCancelled);
}

TEST_F(StoreMirrorTest, StreamShardsLeavesShardsInTheStoreThatWouldFitAndPinsTheirVersion) {
  CountingStore* store;
  auto inner = OpenLocalStorage((dir_.path() / "store").string());
  ASSERT_TRUE(inner.ok());
  auto counting = std::make_unique<CountingStore>(*std::move(inner));
  store = counting.get();
  MirrorOptions o;
  o.cache_dir = dir_.path() / "cache";
  o.stream_shards = true;
  auto mirror = StoreMirror::Create(std::move(counting), o);
  ASSERT_TRUE(mirror.ok());
  ASSERT_TRUE((*mirror)->Ensure("ds", true).ok());
  ASSERT_EQ((*mirror)->Streamed("ds").size(), 1u);
  EXPECT_TRUE(fs::exists((*mirror)->local_root() / "ds/b/2.jpg"));
  EXPECT_EQ((*mirror)->stats().bytes_cached, 3100) << "the shard is not counted as cached";
  absl::SleepFor(absl::Milliseconds(20));
  dir_.Write("store/ds/shard-000000.tar", std::string(20001, 'n'));  // rewritten after the listing
  auto held = (*mirror)->Hold("ds/shard-000000.tar");
  EXPECT_EQ(held.status().code(), absl::StatusCode::kFailedPrecondition) << held.status();
  EXPECT_FALSE(fs::exists((*mirror)->local_root() / "ds/shard-000000.tar"));
  const int reads = store->reads.load();
  EXPECT_EQ((*mirror)->Hold("ds/shard-000000.tar").status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store->reads.load(), reads) << "a changed object is not asked for again";
}

TEST_F(StoreMirrorTest, PrefetchFetchesAheadIntoFreeRoomOnlyAndAHoldFindsTheCopy) {
  for (int i = 0; i < 3; ++i) dir_.Write("store/big/s-" + std::to_string(i) + ".tar", std::string(20000, 'A' + i));
  CountingStore* store;
  auto mirror = Mirror(45000, &store);  // 2 of the 3 shards fit
  ASSERT_TRUE(mirror->Ensure("big", true).ok());
  auto fetches = [&] { return mirror->stats().streamed_read_ahead; };
  auto wait_for = [&](int64_t n) {
    for (int i = 0; i < 500 && fetches() < n; ++i) absl::SleepFor(absl::Milliseconds(10));
    return fetches();
  };
  mirror->Prefetch("big/s-0.tar");
  mirror->Prefetch("big/s-0.tar");  // queued or fetched once
  ASSERT_EQ(wait_for(1), 1);
  const int reads = store->reads.load();
  auto a = mirror->Hold("big/s-0.tar");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(HeldBytes(**a), std::string(20000, 'A'));
  EXPECT_EQ(store->reads.load(), reads) << "the read-ahead's copy is read";
  EXPECT_EQ(mirror->stats().streamed_hits, 1);
  EXPECT_EQ(mirror->stats().streamed_fetches, 0) << "no read fetched: hits and fetches count reads";
  auto b = mirror->Hold("big/s-1.tar");
  ASSERT_TRUE(b.ok());
  // Both held and the cache full: the read-ahead neither waits nor evicts.
  mirror->Prefetch("big/s-2.tar");
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(fetches(), 1);
  EXPECT_EQ(mirror->stats().evicted_bytes, 0);
  // Released, s-0 (read) may go for the read-ahead; s-1 read too.
  a->reset();
  b->reset();
  mirror->Prefetch("big/s-2.tar");
  ASSERT_EQ(wait_for(2), 2);
  EXPECT_EQ(mirror->stats().evicted_bytes, 20000) << "the least recently read shard made room";
}

TEST_F(StoreMirrorTest, AShardIsFetchedIntoRoomThatEarlierRunsDatasetsHeld) {
  for (int i = 0; i < 3; ++i) dir_.Write("store/big/s-" + std::to_string(i) + ".tar", std::string(20000, 'A' + i));
  CountingStore* store;
  ASSERT_TRUE(Mirror(55000, &store)->Ensure("other", true).ok());  // 50,000 bytes, kept by this run
  auto mirror = Mirror(55000, &store);  // "other" is an earlier run's now, and fills most of the cache
  ASSERT_TRUE(mirror->Ensure("big", true).ok());
  ASSERT_EQ(mirror->Streamed("big").size(), 3u);
  auto held = mirror->Hold("big/s-1.tar");
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(HeldBytes(**held), std::string(20000, 'B'));
  EXPECT_FALSE(fs::exists(mirror->local_root() / "other/x.bin")) << "evicted to make room";
  EXPECT_EQ(mirror->stats().evicted_bytes, 50000);
}

TEST_F(StoreMirrorTest, NamesAndKeysThatLeaveTheCacheAreRefused) {
  CountingStore* store;
  auto mirror = Mirror(1 << 20, &store);
  EXPECT_EQ(mirror->Ensure("../etc", true).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mirror->Ensure("missing", true).code(), absl::StatusCode::kNotFound);
  std::atomic<bool> cancelled{true};
  EXPECT_EQ(mirror->Ensure("ds", true, &cancelled).code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace stoker
