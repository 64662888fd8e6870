#include "dataplane/decode/video_index_cache.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;

VideoIndex Sample() {
  VideoIndex v;
  v.width = 64;
  v.height = 48;
  v.seconds_per_tick = 1.0 / 12800;
  v.pts = {0, 512, 1024, 1536};
  return v;
}

TEST(VideoIndexCacheTest, TextRoundTripsAndOnlyTheSameFileStateIsTrusted) {
  const FileStamp stamp{1234, 5678};
  const std::string text = VideoIndexText(stamp, Sample());
  VideoLimits limits;
  std::optional<VideoIndex> back = ParseVideoIndex(text, stamp, limits);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->pts, Sample().pts);
  EXPECT_EQ(back->width, 64);
  EXPECT_EQ(back->seconds_per_tick, Sample().seconds_per_tick);
  EXPECT_FALSE(ParseVideoIndex(text, FileStamp{1234, 5679}, limits));  // the file changed
  EXPECT_FALSE(ParseVideoIndex(text, FileStamp{1235, 5678}, limits));
  VideoLimits few = limits;
  few.max_frames = 3;
  EXPECT_FALSE(ParseVideoIndex(text, stamp, few));  // more frames than allowed
  VideoLimits small = limits;
  small.max_pixels = 64 * 47;
  EXPECT_FALSE(ParseVideoIndex(text, stamp, small));  // a frame over --max-pixels
  VideoLimits brief = limits;
  brief.max_seconds = 0.1;  // the frames span 1536 / 12800 = 0.12 s
  EXPECT_FALSE(ParseVideoIndex(text, stamp, brief));
  // Forged or damaged: not ascending, short, garbage, another magic.
  VideoIndex unordered = Sample();
  unordered.pts = {0, 1024, 512, 1536};
  EXPECT_FALSE(ParseVideoIndex(VideoIndexText(stamp, unordered), stamp, limits));
  EXPECT_FALSE(ParseVideoIndex(text.substr(0, text.size() - 6), stamp, limits));
  EXPECT_FALSE(ParseVideoIndex(text + "99999\n", stamp, limits));
  EXPECT_FALSE(ParseVideoIndex("stoker-video-index 9 1234 5678 64 48 1 1\n0\n", stamp, limits));
  EXPECT_FALSE(ParseVideoIndex("garbage", stamp, limits));
}

// An empty directory of this process under the temporary one.
fs::path FreshDir(const std::string& prefix) {
  const fs::path dir = fs::temp_directory_path() / absl::StrCat(prefix, getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A build that counts its calls in *builds.
std::function<absl::StatusOr<VideoIndex>()> CountedBuild(int* builds) {
  return [builds]() -> absl::StatusOr<VideoIndex> {
    ++*builds;
    return Sample();
  };
}

TEST(VideoIndexCacheTest, BuildsOnceKeepsASidecarAndRebuildsWhenTheFileChanges) {
  const fs::path dir = FreshDir("stoker_vindex_");
  const fs::path file = dir / "v.mp4";
  std::ofstream(file) << "pretend video";
  const fs::path sidecar = file.string() + kVideoIndexSuffix;
  VideoLimits limits;
  int builds = 0;
  auto build = CountedBuild(&builds);
  VideoIndexCache cache;
  absl::StatusOr<std::shared_ptr<const VideoIndex>> a =
      cache.Get(file.string(), *StampOf(file), sidecar, limits, build);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(builds, 1);
  EXPECT_TRUE(fs::exists(file.string() + kVideoIndexSuffix));
  absl::StatusOr<std::shared_ptr<const VideoIndex>> again =
      cache.Get(file.string(), *StampOf(file), sidecar, limits, build);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(builds, 1);  // from memory, the same entry (not a copy)
  EXPECT_EQ(again->get(), a->get());
  EXPECT_EQ(cache.hits(), 1);
  VideoIndexCache restarted;  // a new process: the sidecar, no build
  absl::StatusOr<std::shared_ptr<const VideoIndex>> b =
      restarted.Get(file.string(), *StampOf(file), sidecar, limits, build);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(restarted.sidecar_hits(), 1);
  EXPECT_EQ((*b)->pts, (*a)->pts);
  // The file changes: memory and sidecar are both stale.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(file) << "another pretend video";
  ASSERT_TRUE(cache.Get(file.string(), *StampOf(file), sidecar, limits, build).ok());
  EXPECT_EQ(builds, 2);
  // A build that fails is not kept.
  VideoIndexCache fresh;
  int calls = 0;
  auto failing = [&]() -> absl::StatusOr<VideoIndex> {
    ++calls;
    return absl::DataLossError("corrupt");
  };
  EXPECT_FALSE(fresh.Get("other", FileStamp{1, 1}, fs::path(), limits, failing).ok());
  EXPECT_FALSE(fresh.Get("other", FileStamp{1, 1}, fs::path(), limits, failing).ok());
  EXPECT_EQ(calls, 2);
  fs::remove_all(dir);
}

TEST(VideoIndexCacheTest, AShardsSidecarsGoInAFolderMadeForThem) {
  const fs::path dir = FreshDir("stoker_vindex_shard_");
  const fs::path shard = dir / "s-000000.tar";
  std::ofstream(shard) << "pretend shard";
  const fs::path sidecar = fs::path(shard.string() + kVideoIndexFolderSuffix) / "512";
  VideoLimits limits;
  int builds = 0;
  auto build = CountedBuild(&builds);
  VideoIndexCache cache;
  ASSERT_TRUE(cache.Get(sidecar.string(), *StampOf(shard), sidecar, limits, build).ok());
  ASSERT_TRUE(fs::is_regular_file(sidecar));
  VideoIndexCache restarted;
  ASSERT_TRUE(restarted.Get(sidecar.string(), *StampOf(shard), sidecar, limits, build).ok());
  EXPECT_EQ(builds, 1);
  EXPECT_EQ(restarted.sidecar_hits(), 1);
  // A read-only place for the folder: the index stays in memory, still served.
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  const fs::path other = fs::path(dir.string() + "/t-000000.tar" + kVideoIndexFolderSuffix) / "0";
  VideoIndexCache read_only;
  const bool writable = access(dir.c_str(), W_OK) == 0;  // root writes anyway
  ASSERT_TRUE(read_only.Get(other.string(), *StampOf(shard), other, limits, build).ok());
  EXPECT_EQ(fs::exists(other), writable);
  fs::permissions(dir, fs::perms::owner_all);
  fs::remove_all(dir);
}

TEST(VideoIndexCacheTest, KeepsTheMostRecentEntries) {
  VideoIndexCache cache(2);
  VideoLimits limits;
  int builds = 0;
  auto build = [&]() -> absl::StatusOr<VideoIndex> {
    ++builds;
    return Sample();
  };
  for (const char* key : {"a", "b", "a", "c", "a", "b"}) ASSERT_TRUE(cache.Get(key, {1, 0}, {}, limits, build).ok());
  // a, b built; a hit; c built (b leaves); a hit; b built again.
  EXPECT_EQ(builds, 4);
  EXPECT_EQ(cache.hits(), 2);
}

}  // namespace
}  // namespace stoker
