#include "dataplane/sources/tar_shards.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/sources/dataset.h"
#include "dataplane/sources/synthetic_source.h"
#include "gtest/gtest.h"
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

// Review 1.5: a pax size near INT64_MAX overflowed `data + size`, passed the
// bounds check, and the first Read threw std::length_error on a worker thread
// (the server terminated). Now it is damage at that member.
TEST(TarShardsTest, ShardsOfVideoOrAudioSamplesServeTheirMediaMemberAndKeepTheirOwnSidecar) {
  TempDir dir;
  const auto shard = dir.Write("clips/s.tar", TarArchive({{"a.mp4", "VIDEO-A"},
                                                          {"a.txt", "a caption"},
                                                          {"a.cls", "1"},
                                                          {"b.txt", "no media"},
                                                          {"c.webm", "VIDEO-C"},
                                                          {"c.cls", "0"}}));
  dir.Write("sounds/s.tar", TarArchive({{"x.flac", "AUDIO-X"}, {"x.json", "{}"}, {"y.wav", "AUDIO-Y"}}));
  auto images = TarShardSource::Open(dir.path() / "clips");
  ASSERT_TRUE(absl::IsNotFound(images.status())) << images.status();
  EXPECT_NE(images.status().message().find("no samples with an image"), std::string::npos) << images.status();
  auto video = TarShardSource::Open(dir.path() / "clips", 0, nullptr, nullptr, MediaKind::kVideo);
  ASSERT_TRUE(video.ok()) << video.status();
  EXPECT_EQ((*video)->media(), MediaKind::kVideo);
  ASSERT_EQ((*video)->size(), 2);  // b has no video member
  EXPECT_EQ(*(*video)->Read(0), "VIDEO-A");
  EXPECT_EQ((*video)->label(0), 1);
  EXPECT_EQ(*(*video)->Read(1), "VIDEO-C");
  std::string which;
  EXPECT_EQ(*(*video)->ReadField(0, {"txt"}, &which), "a caption");
  EXPECT_EQ((*video)->FieldMembers(0), std::vector<std::string>{"txt"});  // not the video, not the label
  EXPECT_TRUE(std::filesystem::exists(shard.string() + ".stoker-index-video"));
  EXPECT_TRUE(std::filesystem::exists(shard.string() + ".stoker-index"));  // the image scan's, unchanged
  // Each video's frame index goes beside the shard, named by the member's
  // offset, valid for the shard as opened and the member's size.
  const auto home = (*video)->MediaIndexHomeOf(1);
  ASSERT_TRUE(home.has_value());
  EXPECT_EQ(home->file, shard);
  EXPECT_EQ(home->stamp, *StampOf(shard));
  EXPECT_EQ(home->bytes, 7);
  EXPECT_EQ(home->sidecar.parent_path().string(), shard.string() + ".stoker-index-frames");
  EXPECT_NE(home->sidecar, (*video)->MediaIndexHomeOf(0)->sidecar);
  auto again = TarShardSource::Open(dir.path() / "clips", 0, nullptr, nullptr, MediaKind::kVideo);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->fingerprint(), (*video)->fingerprint());
  EXPECT_TRUE(
      absl::IsNotFound(TarShardSource::Open(dir.path() / "clips", 0, nullptr, nullptr, MediaKind::kAudio).status()));
  // The catalog finds the kind: images first, then audio, then video.
  DatasetCatalog catalog(dir.path());
  auto clips = catalog.Open("clips");
  ASSERT_TRUE(clips.ok()) << clips.status();
  EXPECT_EQ((*clips)->media(), MediaKind::kVideo);
  auto sounds = catalog.Open("sounds");
  ASSERT_TRUE(sounds.ok()) << sounds.status();
  EXPECT_EQ((*sounds)->media(), MediaKind::kAudio);
  EXPECT_EQ((*sounds)->size(), 2);
  EXPECT_EQ(*(*sounds)->Read(1), "AUDIO-Y");
  EXPECT_FALSE((*sounds)->MediaIndexHomeOf(0).has_value());  // audio has no frame index
}

TEST(TarShardsTest, HugePaxSizeIsDamageNotACrash) {
  TempDir dir;
  std::string tar = TarArchive({{"a.jpg", "A"}});
  tar.resize(tar.size() - 1024);  // drop the end-of-archive blocks
  tar += testing::TarPax({"size=9223372036854775000"});
  tar += testing::TarMemberRaw("b.jpg", "00000000001", '0', "B");
  tar.append(1024, '\0');
  dir.Write("ds/s.tar", tar);
  auto source = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_EQ((*source)->size(), 1);
  EXPECT_EQ(*(*source)->Read(0), "A");
  ASSERT_EQ((*source)->damage().size(), 1u);
  EXPECT_NE((*source)->damage()[0].find("truncated member at offset"), std::string::npos) << (*source)->damage()[0];
}

// A GNU base-256 size wider than 63 bits (or negative) is malformed, not a
// shifted-out value that may pass the bounds check.
TEST(TarShardsTest, WideOrNegativeBase256SizeIsMalformed) {
  TempDir dir;
  for (const std::string& field :
       {std::string("\x80") + std::string(11, '\xff'), std::string("\xff") + std::string(11, '\xff'),
        std::string("\x80\x00\x00\x80", 4) + std::string(8, '\0')}) {
    std::string tar = TarArchive({{"a.jpg", "A"}});
    tar.resize(tar.size() - 1024);
    tar += testing::TarMemberRaw("b.jpg", field, '0', "B");
    tar.append(1024, '\0');
    dir.Write("ds/s.tar", tar);
    std::filesystem::remove(dir.path() / "ds/s.tar.stoker-index");
    auto source = TarShardSource::Open(dir.path() / "ds");
    ASSERT_TRUE(source.ok()) << source.status();
    EXPECT_EQ((*source)->size(), 1);
    ASSERT_EQ((*source)->damage().size(), 1u);
  }
}

// Review 1.6: one .cls of 2000000000 made Open push 2e9 class names.
TEST(TarShardsTest, LabelPastTheClassLimitLeavesTheSampleOut) {
  TempDir dir;
  dir.Write(
      "ds/s.tar",
      TarArchive(
          {{"a.jpg", "A"}, {"a.cls", "2000000000"}, {"b.jpg", "B"}, {"b.cls", "4"}, {"c.jpg", "C"}, {"c.cls", "-3"}}));
  auto source = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_EQ((*source)->size(), 1);
  EXPECT_EQ((*source)->Describe(0), "s.tar:b");
  EXPECT_EQ((*source)->class_names().size(), 5u);
}

// A .cls that is not an integer leaves no label to serve: the sample stays
// in the index (a class field reads it as bad_field) and LabelStatus names
// the member and what it holds, so batches with labels can fail it.
TEST(TarShardsTest, AClassFileThatIsNotANumberIsAnUnreadableLabelNotClassZero) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> bad = {{"abc", "'abc'"},
                                                                {"1e3", "'1e3'"},
                                                                {"", "''"},
                                                                {"0x10", "'0x10'"},
                                                                {"99999999999999999999", "'9999"},
                                                                {std::string(80, '7'), "over 63 bytes"}};
  std::vector<std::pair<std::string, std::string>> members = {{"good.jpg", "G"}, {"good.cls", " 4\n"}};
  for (size_t i = 0; i < bad.size(); ++i) {
    members.push_back({"b" + std::to_string(i) + ".jpg", "B"});
    members.push_back({"b" + std::to_string(i) + ".cls", bad[i].first});
  }
  dir.Write("ds/s.tar", TarArchive(members));
  for (int open = 0; open < 2; ++open) {  // built, then from the sidecar
    auto source = TarShardSource::Open(dir.path() / "ds");
    ASSERT_TRUE(source.ok()) << source.status();
    ASSERT_EQ((*source)->size(), static_cast<int64_t>(1 + bad.size()));
    EXPECT_TRUE((*source)->LabelStatus(0).ok());
    EXPECT_EQ((*source)->label(0), 4);
    for (size_t i = 0; i < bad.size(); ++i) {
      const absl::Status status = (*source)->LabelStatus(static_cast<int64_t>(1 + i));
      ASSERT_FALSE(status.ok()) << bad[i].first;
      EXPECT_EQ(DecodeFailureOf(status), DecodeFailure::kBadField);
      EXPECT_NE(status.message().find("s.tar:b" + std::to_string(i) + ".cls holds " + bad[i].second), std::string::npos)
          << status;
      EXPECT_NE(status.message().find("not an integer class label"), std::string::npos) << status;
    }
  }
}

// Members named ".jpg", "..", "...jpg" have an empty key: a sample like any
// other, whose sidecar line is read back instead of rebuilt on every open.
TEST(TarShardsTest, AnEmptyKeyIsASampleAndItsSidecarIsReused) {
  TempDir dir;
  const auto shard =
      dir.Write("ds/s.tar", TarArchive({{".jpg", "E"}, {".cls", "1"}, {"..", "x"}, {"...jpg", "F"}, {"a.jpg", "A"}}));
  auto first = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ((*first)->size(), 2);
  EXPECT_EQ((*first)->Describe(0), "s.tar:");
  EXPECT_EQ(*(*first)->Read(0), "E");
  EXPECT_EQ((*first)->label(0), 1);
  const std::filesystem::path sidecar = shard.string() + ".stoker-index";
  ASSERT_TRUE(std::filesystem::exists(sidecar));
  // Mark the sidecar: a rebuild would rewrite it without the mark.
  std::ifstream in(sidecar);
  std::string header, damage, line, rest;
  std::getline(in, header);
  std::getline(in, damage);
  while (std::getline(in, line)) rest += line + "\n";
  in.close();
  ASSERT_EQ(rest.rfind("\t", 0), 0u) << rest;  // the empty key's line starts with its tab
  std::ofstream(sidecar) << header << "\n" << damage << "\n" << rest << "mark\t512\t1\t3\n";
  auto again = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ((*again)->size(), 3);
  EXPECT_EQ((*again)->Describe(0), "s.tar:");
  EXPECT_EQ((*again)->Describe(2), "s.tar:mark");
}

// A sidecar is trusted only when every entry fits in the shard; a forged or
// stale one is rebuilt from the tar.
TEST(TarShardsTest, SidecarWithOutOfRangeEntriesIsRebuilt) {
  TempDir dir;
  const auto shard = dir.Write("ds/s.tar", TarArchive({{"a.jpg", "A"}}));
  ASSERT_TRUE(TarShardSource::Open(dir.path() / "ds").ok());
  const std::filesystem::path sidecar = shard.string() + ".stoker-index";
  std::ifstream in(sidecar);
  std::string header, damage;
  std::getline(in, header);
  std::getline(in, damage);
  in.close();
  for (const std::string& entry :
       {"x\t512\t9223372036854775000\t0", "x\t512\t-5\t0", "x\t99999999\t1\t0", "x\t512\t1\t2000000000"}) {
    std::ofstream(sidecar) << header << "\n" << damage << "\n" << entry << "\n";
    auto source = TarShardSource::Open(dir.path() / "ds");
    ASSERT_TRUE(source.ok()) << source.status();
    ASSERT_EQ((*source)->size(), 1) << entry;
    EXPECT_EQ((*source)->Describe(0), "s.tar:a") << entry;
    EXPECT_EQ(*(*source)->Read(0), "A") << entry;
  }
  // No temporary files are left beside the shard.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "ds")) files += e.is_regular_file();
  EXPECT_EQ(files, 2);
}

TEST(TarShardsTest, MembersOverTheFileLimitFailAsTooLarge) {
  TempDir dir;
  dir.Write("ds/s.tar", TarArchive({{"a.jpg", std::string(2000, 'a')}, {"b.jpg", "B"}}));
  auto source = TarShardSource::Open(dir.path() / "ds", /*max_file_bytes=*/1000);
  ASSERT_TRUE(source.ok()) << source.status();
  const absl::StatusOr<std::string> big = (*source)->Read(0);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("too_large"), std::string::npos) << big.status();
  EXPECT_EQ(*(*source)->Read(1), "B");
}

// Review 1.9: the catalog kept every dataset name ever opened.
TEST(TarShardsTest, CatalogKeepsABoundedNumberOfIdleDatasets) {
  TempDir dir;
  CatalogOptions options;
  options.max_datasets = 2;
  DatasetCatalog catalog(dir.path(), options);
  auto held = catalog.Open("synthetic:16x16:10:2");
  ASSERT_TRUE(held.ok());
  for (int w = 17; w < 27; ++w) ASSERT_TRUE(catalog.Open("synthetic:" + std::to_string(w) + "x16:10:2").ok());
  EXPECT_EQ(catalog.size(), 2);
  // The held one was never dropped: a reopen returns the same object.
  EXPECT_EQ(catalog.Open("synthetic:16x16:10:2")->get(), held->get());

  CatalogOptions no_synthetic;
  no_synthetic.allow_synthetic = false;
  DatasetCatalog strict(dir.path(), no_synthetic);
  EXPECT_EQ(strict.Open("synthetic:16x16").status().code(), absl::StatusCode::kPermissionDenied);
}

TEST(TarShardsTest, ConcurrentFirstOpensShareOneSource) {
  TempDir dir;
  dir.Write("ds/s.tar", TarArchive({{"a.jpg", "A"}}));
  DatasetCatalog catalog(dir.path());
  std::vector<std::thread> threads;
  std::vector<const SampleSource*> got(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { got[i] = catalog.Open("ds")->get(); });
  }
  for (auto& t : threads) t.join();
  for (const SampleSource* s : got) EXPECT_EQ(s, got[0]);
}

// Streamed shards without a store: "store" is a directory whose shards the
// source reads through HeldObjects the test hands out (and counts).
class StreamedShardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("store/ds/train-000000.tar", TarArchive({{"a.jpg", "AAA"}, {"a.cls", "1"}, {"b.jpg", "BB"}}));
    dir_.Write("store/ds/train-000001.tar", TarArchive({{"c.jpg", "C"}, {"c.cls", "2"}, {"c.txt", "hi"}}));
    std::filesystem::create_directories(dir_.path() / "cache/ds");
    for (const char* name : {"train-000000.tar", "train-000001.tar"}) {
      ObjectInfo o;
      o.key = std::string("ds/") + name;
      o.size = static_cast<int64_t>(std::filesystem::file_size(dir_.path() / "store" / o.key));
      o.mtime_ns = 1'700'000'000'000'000'000;
      streamed_.shards.push_back(o);
    }
    streamed_.hold = [this](const std::string& key, const std::atomic<bool>*) {
      ++holds_;
      const std::filesystem::path path = dir_.path() / "store" / key;
      const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
      EXPECT_GE(fd, 0) << path;
      ObjectInfo info;
      info.key = key;
      return absl::StatusOr<std::shared_ptr<const HeldObject>>(
          std::make_shared<const HeldObject>(fd, path, info, [fd] { close(fd); }));
    };
  }
  absl::StatusOr<std::shared_ptr<const TarShardSource>> OpenStreamed() {
    return TarShardSource::Open(dir_.path() / "cache/ds", 0, nullptr, nullptr, MediaKind::kImage, &streamed_);
  }

  TempDir dir_;
  StreamedShards streamed_;
  std::atomic<int> holds_{0};
};

TEST_F(StreamedShardsTest, WithoutASidecarEachShardIsHeldOnceToIndexItAndReadsMatchALocalOpen) {
  auto local = TarShardSource::Open(dir_.path() / "store/ds");
  ASSERT_TRUE(local.ok()) << local.status();
  std::filesystem::remove(dir_.path() / "store/ds/train-000000.tar.stoker-index");
  std::filesystem::remove(dir_.path() / "store/ds/train-000001.tar.stoker-index");
  auto streamed = OpenStreamed();
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(holds_.load(), 2) << "each shard fetched once to index it";
  ASSERT_EQ((*streamed)->size(), (*local)->size());
  EXPECT_EQ((*streamed)->fingerprint(), (*local)->fingerprint());
  EXPECT_EQ((*streamed)->ShardSizes(), (*local)->ShardSizes());
  for (int64_t i = 0; i < (*local)->size(); ++i) {
    EXPECT_EQ((*streamed)->Describe(i), (*local)->Describe(i));
    EXPECT_EQ(*(*streamed)->Read(i), *(*local)->Read(i));
    EXPECT_EQ((*streamed)->label(i), (*local)->label(i));
  }
  std::string which;
  EXPECT_EQ(*(*streamed)->ReadField(2, {"txt"}, &which), "hi");
  EXPECT_EQ(holds_.load(), 2 + 4) << "one hold per read";
  EXPECT_FALSE((*streamed)->MediaIndexHomeOf(0).has_value());
  // The index built here is kept beside the (absent) store's sidecar: the
  // next open holds nothing.
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "cache/ds/train-000000.tar.stoker-index.here"));
  holds_ = 0;
  // A copy of a shard where the dataset's files are is the streamed shard,
  // not one more.
  std::filesystem::copy_file(dir_.path() / "store/ds/train-000000.tar", dir_.path() / "cache/ds/train-000000.tar");
  auto again = OpenStreamed();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(holds_.load(), 0);
  EXPECT_EQ((*again)->size(), (*local)->size());
  EXPECT_EQ(*(*again)->Read(0), "AAA");
}

TEST_F(StreamedShardsTest, TheStoresSidecarIsUsedWhateverItsTimeAndCheckedAtTheFirstRead) {
  ASSERT_TRUE(TarShardSource::Open(dir_.path() / "store/ds").ok());  // writes the sidecars, as before an upload
  for (const char* name : {"train-000000.tar", "train-000001.tar"}) {
    std::filesystem::copy_file(dir_.path() / "store/ds" / (std::string(name) + ".stoker-index"),
                               dir_.path() / "cache/ds" / (std::string(name) + ".stoker-index"));
  }
  auto streamed = OpenStreamed();
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(holds_.load(), 0) << "the store's sidecars index the shards: none fetched at open";
  EXPECT_EQ((*streamed)->size(), 3);
  EXPECT_EQ(*(*streamed)->Read(1), "BB");
  EXPECT_EQ((*streamed)->label(2), 2);

  // A shard rewritten after its sidecar was made (same size, other keys):
  // its samples fail naming it, the other shard's still serve.
  dir_.Write("store/ds/train-000001.tar", TarArchive({{"d.jpg", "D"}, {"d.cls", "2"}, {"d.txt", "hi"}}));
  ASSERT_EQ(std::filesystem::file_size(dir_.path() / "store/ds/train-000001.tar"), streamed_.shards[1].size);
  auto stale = OpenStreamed();
  ASSERT_TRUE(stale.ok()) << stale.status();
  absl::StatusOr<std::string> bad = (*stale)->Read(2);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "train-000001.tar")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "does not match its index")) << bad.status();
  EXPECT_EQ((*stale)->Read(2).status().code(), absl::StatusCode::kDataLoss) << "checked once, failed every time";
  EXPECT_EQ(*(*stale)->Read(0), "AAA");
}

TEST_F(StreamedShardsTest, AFailedHoldFailsTheReadNamingTheSample) {
  ASSERT_TRUE(OpenStreamed().ok());
  streamed_.hold = [](const std::string& key, const std::atomic<bool>*) {
    return absl::StatusOr<std::shared_ptr<const HeldObject>>(absl::UnavailableError("store down for " + key));
  };
  auto streamed = OpenStreamed();  // indexed by the sidecars built here
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  absl::StatusOr<std::string> read = (*streamed)->Read(0);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(read.status().message(), "train-000000.tar:a")) << read.status();
}

}  // namespace
}  // namespace stoker
