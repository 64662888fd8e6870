#include "common/flag_names.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(std::string, test_data_set, "", "a string flag for the test");
ABSL_FLAG(bool, test_fast_mode, false, "a boolean flag for the test");

namespace stoker {
namespace {

std::vector<std::string> Rewrite(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  std::vector<std::string> storage = DashesToUnderscores(static_cast<int>(argv.size()), argv.data());
  return std::vector<std::string>(argv.begin(), argv.end());
}

TEST(FlagNamesTest, NamesAreRewrittenAndValuesAreNot) {
  EXPECT_EQ(Rewrite({"prog", "--test-data-set=a-b", "-test-fast-mode"}),
            (std::vector<std::string>{"prog", "--test_data_set=a-b", "-test_fast_mode"}));
}

// Review 1.19: "--dataset -a-b" rewrote the separate value to "-a_b".
TEST(FlagNamesTest, ASeparateValueThatStartsWithADashIsLeftAlone) {
  EXPECT_EQ(Rewrite({"prog", "--test-data-set", "-a-b", "--test-fast-mode", "--x-y"}),
            (std::vector<std::string>{"prog", "--test_data_set", "-a-b", "--test_fast_mode", "--x_y"}));
  // After a boolean flag the next argument is a flag of its own.
  EXPECT_EQ(Rewrite({"prog", "--test-fast-mode", "--test-data-set", "--a-b"}),
            (std::vector<std::string>{"prog", "--test_fast_mode", "--test_data_set", "--a-b"}));
  EXPECT_EQ(Rewrite({"prog", "--", "--test-data-set"}), (std::vector<std::string>{"prog", "--", "--test-data-set"}));
}

}  // namespace
}  // namespace stoker
