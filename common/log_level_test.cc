#include "common/log_level.h"

#include <cstdlib>

#include "glog/logging.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(LogLevelTest, NamesAndNumbers) {
  EXPECT_EQ(*ParseLogLevel("debug"), 0);
  EXPECT_EQ(*ParseLogLevel("INFO"), 0);
  EXPECT_EQ(*ParseLogLevel(" Warning "), 1);
  EXPECT_EQ(*ParseLogLevel("error"), 2);
  EXPECT_EQ(*ParseLogLevel("2"), 2);
  EXPECT_EQ(*ParseLogLevel("3"), 3);
}

TEST(LogLevelTest, BadValuesNameWhatIsTaken) {
  for (const char* bad : {"", "4", "-1", "verbose", "1.5"}) {
    const auto level = ParseLogLevel(bad);
    ASSERT_FALSE(level.ok()) << bad;
    EXPECT_NE(level.status().message().find("expected debug, info, warning, error"), std::string::npos);
  }
}

TEST(LogLevelTest, EnvironmentSetsGlogsLevelAndABadOneIsIgnored) {
  const int before = FLAGS_minloglevel;
  setenv("STOKER_LOG_LEVEL", "error", 1);
  ApplyLogLevelFromEnv();
  EXPECT_EQ(FLAGS_minloglevel, 2);
  setenv("STOKER_LOG_LEVEL", "loud", 1);
  ApplyLogLevelFromEnv();
  EXPECT_EQ(FLAGS_minloglevel, 2);
  unsetenv("STOKER_LOG_LEVEL");
  FLAGS_minloglevel = before;
}

}  // namespace
}  // namespace stoker
