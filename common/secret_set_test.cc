#include "common/secret_set.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "gtest/gtest.h"

namespace stoker {
namespace {

class SecretSetTest : public ::testing::Test {
 protected:
  void Write(const std::string& text) {
    // Written beside and renamed, as an operator (or a Secret update) does.
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << text;
    std::filesystem::rename(tmp, path_);
  }
  // One file per test and process: ctest runs the tests of this file at once.
  std::string path_ = ::testing::TempDir() + "/secret_set_test_" +
                      ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                      std::to_string(::getpid());
};

TEST_F(SecretSetTest, AcceptsExactlyTheListedSecrets) {
  Write("# tokens\n\n  first-token-0123456789  \nsecond-token-0123456789\n");
  auto set = SecretSet::Load(path_);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ((*set)->size(), 2u);
  EXPECT_TRUE((*set)->Contains("first-token-0123456789"));
  EXPECT_TRUE((*set)->Contains("second-token-0123456789"));
  EXPECT_FALSE((*set)->Contains("first-token-012345678"));    // a prefix
  EXPECT_FALSE((*set)->Contains("first-token-01234567890"));  // longer
  EXPECT_FALSE((*set)->Contains(""));
  EXPECT_FALSE((*set)->Contains("# tokens"));
}

TEST_F(SecretSetTest, RefusesBadFilesNamingTheProblem) {
  struct Case {
    std::string text, expected;
  } cases[] = {
      {"", "holds no secret"},
      {"# only a comment\n", "holds no secret"},
      {"short\n", "line 1: secret is 5 characters; at least 16"},
      {"ok-token-0123456789\nhas a space in it 0123\n", "line 2: a secret may not hold spaces"},
  };
  for (const Case& c : cases) {
    Write(c.text);
    auto set = SecretSet::Load(path_);
    ASSERT_FALSE(set.ok()) << c.text;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(set.status().message().find(c.expected), std::string::npos) << set.status();
  }
  auto missing = SecretSet::Load(path_ + ".missing");
  EXPECT_NE(missing.status().message().find("cannot read secrets file"), std::string::npos) << missing.status();
}

TEST_F(SecretSetTest, RotatesWhenTheFileChangesAndKeepsOldSecretsOverABadEdit) {
  Write("old-token-0123456789\n");
  auto set = SecretSet::Load(path_, absl::ZeroDuration());
  ASSERT_TRUE(set.ok()) << set.status();
  Write("old-token-0123456789\nnew-token-0123456789\n");  // rotation, step 1
  EXPECT_TRUE((*set)->Contains("new-token-0123456789"));
  EXPECT_TRUE((*set)->Contains("old-token-0123456789"));
  Write("new-token-0123456789\n");  // step 2: the old one is gone
  EXPECT_FALSE((*set)->Contains("old-token-0123456789"));
  EXPECT_TRUE((*set)->Contains("new-token-0123456789"));
  Write("tiny\n");  // a bad edit: refused, the secrets before stay
  EXPECT_TRUE((*set)->Contains("new-token-0123456789"));
  EXPECT_FALSE((*set)->Contains("tiny"));
}

TEST_F(SecretSetTest, ChecksTheFileAtMostOncePerRecheck) {
  Write("old-token-0123456789\n");
  auto set = SecretSet::Load(path_, absl::Hours(1));
  ASSERT_TRUE(set.ok()) << set.status();
  Write("new-token-0123456789\n");
  EXPECT_TRUE((*set)->Contains("old-token-0123456789"));  // not re-read yet
  EXPECT_FALSE((*set)->Contains("new-token-0123456789"));
}

}  // namespace
}  // namespace stoker
