// The tokenizer cache against files a session may name: a shard, a file over
// the size limit, a directory, bytes shaped like a model that SentencePiece
// refuses (or, in sanitizer builds, cannot load); failures are kept and
// concurrent first uses share one load.
#include "dataplane/fields/tokenizer.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testdata/tar_writer.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TarArchive;
using ::stoker::testing::TempDir;

// A length-delimited protobuf field (field < 16, length < 128).
std::string Field(int field, const std::string& body) {
  return std::string(1, static_cast<char>(field << 3 | 2)) + std::string(1, static_cast<char>(body.size())) + body;
}

TEST(TokenizerTest, TheModelsFormatIsCheckedBeforeSentencePieceSeesIt) {
  EXPECT_TRUE(CheckSentencePieceModel(Field(1, Field(1, "a")) + Field(2, "") + Field(1, Field(1, "b"))).ok());
  struct Case {
    std::string bytes;
    const char* expected;
  } cases[] = {
      {TarArchive({{"s0.jpg", "x"}}), "byte 0: field 14 of wire type 3 is not part of a SentencePiece model"},
      {"hello world", "byte 0: field 13 of wire type 0"},
      {Field(2, "abc"), "no pieces"},
      {"", "no pieces"},
      {Field(1, "abc").substr(0, 3), "byte 0: field 1 runs past the end of the file"},
      {std::string("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11), "byte 0: field 1 runs past the end"},
      {std::string("\x8a", 1), "byte 0: a field key that does not end"},
  };
  for (const Case& c : cases) {
    const absl::Status s = CheckSentencePieceModel(c.bytes);
    ASSERT_FALSE(s.ok()) << c.expected;
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << s;
  }
}

TEST(TokenizerTest, AShardOrAnOversizedFileIsRefusedWithoutLoadingIt) {
  TempDir dir;
  dir.Write("imagenet/shard-0000.tar", TarArchive({{"s0.jpg", std::string(5000, 'x')}, {"s0.cls", "1"}}));
  dir.Write("big.model", Field(1, Field(1, "a")) + std::string(4096, '\0'));
  std::filesystem::create_directories(dir.path() / "a_dir");
  TokenizerCache cache(dir.path(), /*max_model_bytes=*/4096);
  auto shard = cache.Get("imagenet/shard-0000.tar");
  ASSERT_FALSE(shard.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(shard.status())) << shard.status();
  const auto shard_bytes = std::filesystem::file_size(dir.path() / "imagenet/shard-0000.tar");
  EXPECT_NE(shard.status().message().find(absl::StrCat("tokenizer 'imagenet/shard-0000.tar' has ", shard_bytes,
                                                       " bytes; a SentencePiece model file may have at most 4096")),
            std::string::npos)
      << shard.status();
  auto big = cache.Get("big.model");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("at most 4096"), std::string::npos) << big.status();
  auto directory = cache.Get("a_dir");
  EXPECT_FALSE(directory.ok());
  EXPECT_EQ(cache.loads(), 0);

  TokenizerCache roomy(dir.path());
  auto refused = roomy.Get("imagenet/shard-0000.tar");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("tokenizer 'imagenet/shard-0000.tar' is not a SentencePiece model: byte 0"),
            std::string::npos)
      << refused.status();
  EXPECT_EQ(roomy.loads(), 0);  // refused by its shape, never handed to SentencePiece
}

TEST(TokenizerTest, AFailedLoadIsKeptAndConcurrentFirstUsesShareOne) {
  TempDir dir;
  // Shaped like a model, refused by SentencePiece (its piece has no text),
  // or not loadable at all in a sanitizer build: a load that fails.
  const auto path = dir.Write("bad.model", Field(1, Field(2, "")) + Field(1, Field(2, "")));
  TokenizerCache cache(dir.path());
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] { results[static_cast<size_t>(i)] = cache.Get("bad.model").status(); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(s.message().find("tokenizer 'bad.model' is not a SentencePiece model"), std::string::npos) << s;
  }
  EXPECT_EQ(cache.loads(), 1);
  EXPECT_FALSE(cache.Get("bad.model").ok());
  EXPECT_EQ(cache.loads(), 1);  // kept: not read again
  // A changed file is read again.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  dir.Write("bad.model", Field(1, Field(2, "")));
  EXPECT_FALSE(cache.Get("bad.model").ok());
  EXPECT_EQ(cache.loads(), 2);
}

}  // namespace
}  // namespace stoker
