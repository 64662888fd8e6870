// Local mode (ClientConfig::local_workers): the data-plane core in the
// client's own process as one more producer. Real stoker-server processes on
// 127.0.0.1, the real stoker-bench, and the client library in process.
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/stoker_client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testdata/drain_epoch.h"
#include "tests/testdata/image_set.h"
#include "tests/testdata/server_process.h"
#include "tests/testdata/subprocess.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::Subprocess;
using ::stoker::testing::TempDir;

constexpr int kClasses = 3, kPerClass = 12, kSamples = kClasses * kPerClass;
constexpr char kPipeline[] = "random_resized_crop(32), random_horizontal_flip(0.5)";

using ::stoker::testing::RunningServer;

RunningServer StartServer(const std::filesystem::path& root, int delay_ms = 0) {
  return testing::StartServerProcess(STOKER_SERVER_BIN, root,
                                     {"--workers=1", absl::StrCat("--test-sample-delay-ms=", delay_ms)});
}

struct BenchRun {
  int exit_code = -1;
  std::string output;
  std::map<std::pair<int, int>, std::string> hashes;  // (epoch, batch) -> content hash
  std::map<std::pair<int, int>, int> deliveries;      // (epoch, batch) -> times delivered
  std::map<int, std::multiset<int64_t>> samples;      // epoch -> sample indices delivered
  std::map<std::string, int> per_producer;            // producer -> batches
};

class LocalModeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    testing::ImageSetOptions o;
    o.classes = kClasses;
    o.per_class = kPerClass;
    o.min_side = 80;
    o.max_side = 200;
    ASSERT_TRUE(testing::WriteImageFolder(root_->path() / "ds", o).ok());
    // Another copy with one image fewer: another fingerprint.
    ASSERT_TRUE(testing::WriteImageFolder(root_->path() / "other" / "ds", o).ok());
    std::filesystem::path victim;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root_->path() / "other" / "ds")) {
      if (e.is_regular_file()) victim = e.path();
    }
    std::filesystem::remove(victim);
  }
  static void TearDownTestSuite() { delete root_; }

  ClientConfig LocalConfig(int workers) const {
    ClientConfig config;
    config.local.workers = workers;
    config.local.data_root = root_->path().string();
    config.session.set_dataset("ds");
    config.session.set_batch_size(4);
    config.session.set_seed(5);
    config.session.add_pipeline()->mutable_center_crop()->set_size(32);
    return config;
  }

  BenchRun Bench(const std::vector<std::string>& extra) {
    TempDir out;
    const auto log = out.path() / "batches.jsonl";
    std::vector<std::string> argv = {STOKER_BENCH_BIN,
                                     "--dataset=ds",
                                     "--metrics-port=-1",
                                     "--batch-size=4",
                                     "--epochs=2",
                                     "--seed=11",
                                     std::string("--pipeline=") + kPipeline,
                                     "--log-batches=" + log.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    BenchRun run;
    auto p = Subprocess::Start(argv);
    EXPECT_TRUE(p.ok());
    auto code = (*p)->Wait(absl::Seconds(120));
    EXPECT_TRUE(code.ok()) << "stoker-bench did not finish";
    run.exit_code = code.ok() ? *code : -1;
    run.output = (*p)->output();
    std::ifstream in(log);
    for (std::string line; std::getline(in, line);) {
      const auto l = nlohmann::json::parse(line);
      const std::pair<int, int> key{l["epoch"], l["batch"]};
      run.hashes[key] = l["hash"];
      ++run.deliveries[key];
      for (int64_t i : l["sample_indices"]) run.samples[l["epoch"]].insert(i);
      ++run.per_producer[l["server"].get<std::string>()];
    }
    return run;
  }

  static void ExpectExactlyOnce(const BenchRun& run) {
    ASSERT_EQ(run.deliveries.size(), 2u * kSamples / 4) << run.output;
    for (const auto& [key, n] : run.deliveries) EXPECT_EQ(n, 1) << "epoch " << key.first << " batch " << key.second;
    std::multiset<int64_t> all;
    for (int64_t i = 0; i < kSamples; ++i) all.insert(i);
    for (int epoch : {0, 1}) EXPECT_EQ(run.samples.at(epoch), all) << "epoch " << epoch;
  }

  static TempDir* root_;
};

TempDir* LocalModeTest::root_ = nullptr;

TEST_F(LocalModeTest, LocalAloneIsACompleteLoaderWithAServersBytes) {
  RunningServer server = StartServer(root_->path());
  const BenchRun remote = Bench({"--servers=" + server.address});
  ASSERT_EQ(remote.exit_code, 0) << remote.output;
  const BenchRun local = Bench({"--local-workers=2", "--data-root=" + root_->path().string()});
  ASSERT_EQ(local.exit_code, 0) << local.output;
  ExpectExactlyOnce(local);
  EXPECT_EQ(local.per_producer, (std::map<std::string, int>{{"local", 2 * kSamples / 4}}));
  EXPECT_NE(local.output.find("0 server(s) + 2 local worker(s)"), std::string::npos) << local.output;
  // Random crops and flips drawn from (seed, epoch, sample): the same bytes
  // whoever made them.
  EXPECT_EQ(local.hashes, remote.hashes);
}

TEST_F(LocalModeTest, LocalAndRemoteTogetherDeliverEachBatchOnceWithTheSameBytes) {
  // The server is slowed so that both producers take a share of the epoch.
  RunningServer server = StartServer(root_->path(), /*delay_ms=*/15);
  const BenchRun alone = Bench({"--servers=" + server.address});
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const BenchRun both = Bench({"--servers=" + server.address, "--local-workers=1",
                               "--data-root=" + root_->path().string(), "--test-local-delay-ms=15"});
  ASSERT_EQ(both.exit_code, 0) << both.output;
  ExpectExactlyOnce(both);
  EXPECT_GT(both.per_producer.count("local") ? both.per_producer.at("local") : 0, 0) << both.output;
  EXPECT_GT(both.per_producer.count(server.address) ? both.per_producer.at(server.address) : 0, 0) << both.output;
  EXPECT_EQ(both.hashes, alone.hashes);
}

TEST_F(LocalModeTest, ResumeWithAnyMixOfProducersDeliversExactlyTheRest) {
  RunningServer server = StartServer(root_->path());
  std::set<std::pair<int64_t, std::vector<int64_t>>> first_half;
  v1::ClientPosition position;
  {
    ClientConfig config = LocalConfig(1);
    config.servers = {server.address};
    auto client = StokerClient::Connect(config, nullptr);
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_TRUE((*client)->StartEpoch(0).ok());
    for (int i = 0; i < 4; ++i) {
      Batch b;
      bool end = false;
      ASSERT_TRUE((*client)->Next(&b, &end).ok());
      ASSERT_FALSE(end);
      first_half.insert({b.batch_index, b.sample_indices});
    }
    position = (*client)->Position();
  }
  // Resumed by local workers alone.
  auto client = StokerClient::Connect(LocalConfig(2), nullptr);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Resume(position).ok());
  std::multiset<int64_t> samples;
  for (const auto& [batch, indices] : first_half) samples.insert(indices.begin(), indices.end());
  for (;;) {
    Batch b;
    bool end = false;
    ASSERT_TRUE((*client)->Next(&b, &end).ok());
    if (end) break;
    EXPECT_FALSE(first_half.count({b.batch_index, b.sample_indices})) << "batch " << b.batch_index << " again";
    EXPECT_EQ(b.server, "local");
    samples.insert(b.sample_indices.begin(), b.sample_indices.end());
  }
  std::multiset<int64_t> all;
  for (int64_t i = 0; i < kSamples; ++i) all.insert(i);
  EXPECT_EQ(samples, all);
}

TEST_F(LocalModeTest, VerdictCountsLocalWorkAsTheCpuStage) {
  const BenchRun run =
      Bench({"--local-workers=1", "--data-root=" + root_->path().string(), "--test-local-delay-ms=20", "--device=cpu"});
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("bottleneck: server_cpu"), std::string::npos) << run.output;
}

TEST_F(LocalModeTest, BadLocalConfigurationsAreRefusedByName) {
  ClientConfig none = LocalConfig(0);
  auto no_producer = StokerClient::Connect(none, nullptr);
  EXPECT_EQ(no_producer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(no_producer.status().message(), "local_workers")) << no_producer.status();

  ClientConfig bad_root = LocalConfig(1);
  bad_root.local.data_root = (root_->path() / "missing").string();
  auto root = StokerClient::Connect(bad_root, nullptr);
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(root.status().message(), "missing")) << root.status();

  ClientConfig missing = LocalConfig(1);
  missing.session.set_dataset("nope");
  auto dataset = StokerClient::Connect(missing, nullptr);
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(dataset.status().message(), "local producer")) << dataset.status();

  // The local copy differs from the server's: refused before any batch.
  RunningServer server = StartServer(root_->path());
  ClientConfig other = LocalConfig(1);
  other.local.data_root = (root_->path() / "other").string();
  other.servers = {server.address};
  auto disagree = StokerClient::Connect(other, nullptr);
  EXPECT_EQ(disagree.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(disagree.status().message(), "disagree")) << disagree.status();
}

}  // namespace
}  // namespace stoker
