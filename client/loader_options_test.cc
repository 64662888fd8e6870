#include "client/loader_options.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(LoaderOptionsTest, TheTableNamesEveryMemberOnceInItsOrder) {
  std::set<std::string> names, keywords;
  size_t visited = 0;
  ForEachOptionMember([&](const OptionInfo& info, auto member) {
    EXPECT_STREQ(info.name, LoaderOptionTable()[visited].name);
    ++visited;
    EXPECT_TRUE(names.insert(info.name).second) << info.name << " described twice";
    if (*info.python) {
      EXPECT_TRUE(keywords.insert(info.python).second) << info.python << " names two options";
    }
    EXPECT_NE(std::string(info.help), "") << info.name;
    (void)member;
  });
  EXPECT_EQ(visited, LoaderOptionTable().size());
  EXPECT_GT(visited, 60u);
}

TEST(LoaderOptionsTest, ValueTextShowsEachTypesDefault) {
  LoaderOptions o;
  EXPECT_EQ(OptionValueText(o, "servers"), "[]");
  EXPECT_EQ(OptionValueText(o, "data_root"), "\".\"");
  EXPECT_EQ(OptionValueText(o, "prefetch_bytes"), "2147483648");
  EXPECT_EQ(OptionValueText(o, "ordered"), "true");
  EXPECT_EQ(OptionValueText(o, "slot_wait_s"), "60");
  EXPECT_EQ(OptionValueText(o, "mean"), "[0.485, 0.456, 0.406]");
  o.servers = {"a:1", "b:2"};
  o.metrics_host = "say \"hi\"";
  EXPECT_EQ(OptionValueText(o, "servers"), "[\"a:1\", \"b:2\"]");
  EXPECT_EQ(OptionValueText(o, "metrics_host"), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(OptionValueText(o, "no_such_option"), "");
}

TEST(LoaderOptionsTest, TheDefaultsWithAServerMakeAConfig) {
  LoaderOptions o;
  o.servers = {"127.0.0.1:1"};
  o.dataset = "ds";
  absl::StatusOr<LoaderConfig> c = ToConfig(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->client.session.batch_size(), 256);
  EXPECT_EQ(c->client.session.pipeline_size(), 2);  // the default pipeline, parsed
  EXPECT_EQ(c->client.prefetch_bytes, int64_t{2} << 30);
  EXPECT_EQ(c->client.rpc_timeout, absl::Seconds(10));
  EXPECT_EQ(c->metrics_port, -1);
}

TEST(LoaderOptionsTest, ABadValueIsRefusedNamingItsOption) {
  LoaderOptions o;
  o.servers = {"127.0.0.1:1"};
  o.dataset = "ds";
  o.cache_mode = "sometimes";
  EXPECT_NE(ToConfig(o).status().message().find("cache_mode 'sometimes'"), std::string::npos);
  o.cache_mode = "none";
  o.streams_per_server = 0;
  EXPECT_NE(ToConfig(o).status().message().find("streams_per_server 0"), std::string::npos);
  o.streams_per_server = 2;
  o.servers.clear();
  EXPECT_NE(ToConfig(o).status().message().find("no producers"), std::string::npos);
}

}  // namespace
}  // namespace stoker
