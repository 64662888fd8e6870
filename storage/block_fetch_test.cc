#include "storage/block_fetch.h"

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "storage/local_storage.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

namespace fs = std::filesystem;
using ::stoker::testing::TempDir;

std::string Read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A local store that records the ranges read and fails the one at `fail_at`.
class RecordingStore final : public Storage {
 public:
  explicit RecordingStore(std::unique_ptr<Storage> inner) : inner_(std::move(inner)) {}
  std::string root() const override { return inner_->root(); }
  std::string Describe(absl::string_view key) const override { return inner_->Describe(key); }
  absl::StatusOr<ObjectInfo> Stat(absl::string_view key) override { return inner_->Stat(key); }
  absl::StatusOr<std::vector<ObjectInfo>> List(absl::string_view prefix) override { return inner_->List(prefix); }
  absl::Status ReadRange(const ObjectInfo& o, int64_t offset, int64_t length, std::string* out) override {
    {
      absl::MutexLock lock(&mu);
      ranges.insert({o.key, offset});
    }
    if (o.key == fail_key && offset == fail_at) return absl::UnavailableError("injected");
    return inner_->ReadRange(o, offset, length, out);
  }
  absl::Mutex mu;
  std::set<std::pair<std::string, int64_t>> ranges;
  std::string fail_key;
  int64_t fail_at = -1;

 private:
  std::unique_ptr<Storage> inner_;
};

bool HasPart(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.path().string().find(kPartSuffix) != std::string::npos) return true;
  }
  return false;
}

class BlockFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 10000; ++i) big_ += static_cast<char>('a' + i % 23);
    dir_.Write("store/big.bin", big_);
    dir_.Write("store/d/small.bin", "xyz");
    dir_.Write("store/empty.bin", "");
    auto inner = OpenLocalStorage((dir_.path() / "store").string());
    ASSERT_TRUE(inner.ok());
    store_ = std::make_unique<RecordingStore>(*std::move(inner));
    for (const char* key : {"big.bin", "d/small.bin", "empty.bin"}) infos_.push_back(*store_->Stat(key));
    for (const ObjectInfo& o : infos_) objects_.push_back(&o);
    options_.block_bytes = 1024;
    options_.parallel = 4;
  }

  TempDir dir_;
  std::string big_;
  std::unique_ptr<RecordingStore> store_;
  std::vector<ObjectInfo> infos_;
  std::vector<const ObjectInfo*> objects_;
  BlockFetchOptions options_;
};

TEST_F(BlockFetchTest, CopiesEveryObjectInBlocksByteForByte) {
  const fs::path out = dir_.path() / "cache";
  std::atomic<int64_t> done{0};
  options_.bytes_done = &done;
  ASSERT_TRUE(FetchObjects(*store_, objects_, out, options_).ok());
  EXPECT_EQ(done.load(), static_cast<int64_t>(big_.size()) + 3) << "the progress counter counts each byte once";
  EXPECT_EQ(Read(out / "big.bin"), big_);
  EXPECT_EQ(Read(out / "d/small.bin"), "xyz");
  EXPECT_TRUE(fs::exists(out / "empty.bin"));
  EXPECT_EQ(fs::file_size(out / "empty.bin"), 0u);
  EXPECT_EQ(store_->ranges.size(), 10u + 1u) << "ten 1 KiB blocks of big.bin, one of small.bin, none of empty.bin";
  EXPECT_FALSE(HasPart(out));
  EXPECT_TRUE(SyncFilesystem(out).ok());
}

TEST_F(BlockFetchTest, AFailedBlockFailsTheFetchAndLeavesNoPartOrTornFile) {
  store_->fail_key = "big.bin";
  store_->fail_at = 5 * 1024;
  const fs::path out = dir_.path() / "cache";
  const absl::Status s = FetchObjects(*store_, objects_, out, options_);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_FALSE(fs::exists(out / "big.bin"));
  EXPECT_FALSE(HasPart(out));
}

TEST_F(BlockFetchTest, StopsWhenCancelled) {
  std::atomic<bool> cancelled{true};
  const absl::Status s = FetchObjects(*store_, objects_, dir_.path() / "cache", options_, &cancelled);
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  EXPECT_FALSE(fs::exists(dir_.path() / "cache/big.bin"));
}

}  // namespace
}  // namespace stoker
