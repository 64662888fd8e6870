// stoker-materialize --servers: real stoker-server processes on 127.0.0.1
// make the samples. The shards must be byte-identical to local workers'
// (same names, sizes, checksums, failed samples), also when a server is
// SIGKILLed mid-run and when a run interrupted on the servers is finished by
// local workers; a materialising session's bad settings are refused by name.
#include "materialize/remote_maker.h"

#include <signal.h>

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sessions/data_service_core.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "tests/testdata/image_set.h"
#include "tests/testdata/subprocess.h"
#include "tests/testdata/tar_writer.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;
using ::stoker::testing::Subprocess;

struct Server {
  std::unique_ptr<Subprocess> process;
  std::string address;
};

Server StartServer(const fs::path& root, int delay_ms) {
  auto p = Subprocess::Start({STOKER_SERVER_BIN, "--host=127.0.0.1", "--port=0", "--metrics-port=-1", "--workers=1",
                              "--data-root=" + root.string(), absl::StrCat("--test-sample-delay-ms=", delay_ms),
                              "--shutdown-grace-seconds=2"});
  EXPECT_TRUE(p.ok()) << p.status();
  auto line = (*p)->WaitForLine("listening on", absl::Seconds(20));
  EXPECT_TRUE(line.ok()) << line.status();
  return {*std::move(p), absl::StrCat("127.0.0.1:", *testing::PortFromLine(*line))};
}

class RemoteMakerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ImageSetOptions o;
    o.classes = 3;
    o.per_class = 8;
    o.min_side = 60;
    o.max_side = 140;
    ASSERT_TRUE(testing::WriteImageFolder(root_.path() / "photos", o).ok());
    root_.Write("photos/class_001/zz_bad.jpg", "not an image");  // listed as failed, never stored
  }

  MaterializeConfig Config(const std::string& out, const std::string& format = "raw",
                           const std::string& compression = "zstd") {
    MaterializeConfig c;
    c.data_root = root_.path();
    c.dataset = "photos";
    c.prefix = *ParsePipelineText("resize(48)");
    c.format = *ParseStoredFormat(format, compression);
    c.out = root_.path() / out;
    c.workers = 2;
    c.shard_samples = 6;
    c.batch_size = 3;
    c.progress_every = absl::ZeroDuration();
    return c;
  }

  static ConnectRemote On(std::vector<std::string> servers) {
    RemoteOptions o;
    o.servers = std::move(servers);
    o.unavailable_timeout = absl::Seconds(20);
    o.batch_timeout = absl::Seconds(20);
    return RemoteOnServers(o);
  }

  // Shards and failed samples of two outputs are the same, byte for byte.
  static void ExpectSameOutput(const MaterializeReport& a, const MaterializeReport& b) {
    ASSERT_EQ(a.manifest.shards.size(), b.manifest.shards.size());
    for (size_t i = 0; i < a.manifest.shards.size(); ++i) {
      const Manifest::Shard &x = a.manifest.shards[i], &y = b.manifest.shards[i];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.samples, y.samples) << x.name;
      EXPECT_EQ(x.bytes, y.bytes) << x.name;
      EXPECT_EQ(x.checksum, y.checksum) << x.name;
    }
    EXPECT_EQ(a.manifest.samples, b.manifest.samples);
    EXPECT_EQ(a.manifest.source_fingerprint, b.manifest.source_fingerprint);
    EXPECT_EQ(a.manifest.class_names, b.manifest.class_names);
    ASSERT_EQ(a.manifest.failed.size(), b.manifest.failed.size());
    for (size_t i = 0; i < a.manifest.failed.size(); ++i) {
      EXPECT_EQ(a.manifest.failed[i].index, b.manifest.failed[i].index);
      EXPECT_EQ(a.manifest.failed[i].path, b.manifest.failed[i].path);
      EXPECT_EQ(a.manifest.failed[i].reason, b.manifest.failed[i].reason);
    }
  }

  testing::TempDir root_;
};

TEST_F(RemoteMakerTest, TwoServersMakeTheSameShardsAsLocalWorkers) {
  absl::StatusOr<MaterializeReport> local = Materialize(Config("local"));
  ASSERT_TRUE(local.ok()) << local.status();
  ASSERT_EQ(local->manifest.samples, 24);
  ASSERT_EQ(local->manifest.failed.size(), 1u);

  Server a = StartServer(root_.path(), 0), b = StartServer(root_.path(), 0);
  MaterializeConfig config = Config("remote");
  config.remote = On({a.address, b.address});
  std::vector<MaterializeProgress> reports;
  absl::StatusOr<MaterializeReport> remote =
      Materialize(config, [&](const MaterializeProgress& p) { reports.push_back(p); });
  ASSERT_TRUE(remote.ok()) << remote.status();
  ExpectSameOutput(*local, *remote);
  EXPECT_EQ(remote->shards_made, 5);
  ASSERT_FALSE(reports.empty());
  EXPECT_EQ(reports.back().done, 25);
  EXPECT_EQ(reports.back().failed, 1);
  EXPECT_EQ(reports.back().stored_bytes, remote->stored_bytes);
}

TEST_F(RemoteMakerTest, ReEncodedJpegShardsEqualLocalOnesToo) {
  absl::StatusOr<MaterializeReport> local = Materialize(Config("local", "jpeg:85", "none"));
  ASSERT_TRUE(local.ok()) << local.status();
  Server a = StartServer(root_.path(), 0);
  MaterializeConfig config = Config("remote", "jpeg:85", "none");
  config.remote = On({a.address});
  config.batch_size = 5;  // lowered to 3, which tiles the 6-sample shards
  absl::StatusOr<MaterializeReport> remote = Materialize(config);
  ASSERT_TRUE(remote.ok()) << remote.status();
  ExpectSameOutput(*local, *remote);
}

TEST_F(RemoteMakerTest, TheFieldsOfWebDatasetSamplesAreStoredAsLocalWorkersStoreThem) {
  std::vector<std::pair<std::string, std::string>> members;
  for (int i = 0; i < 7; ++i) {
    const std::string key = "s" + std::to_string(i);
    members.push_back(
        {key + ".jpg", testing::EncodeJpeg(testing::SyntheticImage(50, 60, static_cast<uint64_t>(i)), 90)});
    members.push_back({key + ".cls", std::to_string(i % 2)});
    if (i != 2) members.push_back({key + ".txt", "caption " + key});
    members.push_back({key + ".json", "{\"i\": " + std::to_string(i) + "}"});
    if (i == 4) members.push_back({key + ".xxh3", "reserved: left out on both"});
  }
  root_.Write("wds/a-000000.tar", testing::TarArchive(members));
  MaterializeConfig config = Config("local");
  config.dataset = "wds";
  absl::StatusOr<MaterializeReport> local = Materialize(config);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->manifest.fields, (std::vector<std::string>{"json", "txt"}));
  Server a = StartServer(root_.path(), 0);
  config.out = root_.path() / "remote";
  config.remote = On({a.address});
  absl::StatusOr<MaterializeReport> remote = Materialize(config);
  ASSERT_TRUE(remote.ok()) << remote.status();
  ExpectSameOutput(*local, *remote);
  EXPECT_EQ(remote->manifest.fields, local->manifest.fields);
}

TEST_F(RemoteMakerTest, ShardsSizedFromTheServersFirstBatchHoldWholeBatches) {
  Server a = StartServer(root_.path(), 0);
  MaterializeConfig config = Config("remote");
  config.remote = On({a.address});
  config.shard_samples = 0;
  config.shard_bytes = 12'000;  // about one sample (48 x 64 x 3 + headers): rounded up to a batch of 4
  config.batch_size = 4;
  absl::StatusOr<MaterializeReport> remote = Materialize(config);
  ASSERT_TRUE(remote.ok()) << remote.status();
  MaterializeConfig same = Config("local");
  same.shard_samples = 4;
  absl::StatusOr<MaterializeReport> local = Materialize(same);
  ASSERT_TRUE(local.ok()) << local.status();
  ExpectSameOutput(*local, *remote);
  EXPECT_EQ(remote->manifest.shards.size(), 7u);  // 25 samples, 4 per shard
}

TEST_F(RemoteMakerTest, ARunInterruptedOnLocalWorkersIsFinishedByTheServers) {
  MaterializeConfig whole = Config("local");
  whole.shard_samples = 8;
  absl::StatusOr<MaterializeReport> local = Materialize(whole);
  ASSERT_TRUE(local.ok()) << local.status();

  std::atomic<bool> cancel{false};
  MaterializeConfig first = Config("mixed");
  first.shard_samples = 8;
  first.workers = 1;
  first.test_sample_delay = absl::Milliseconds(20);
  first.cancel = &cancel;
  absl::StatusOr<MaterializeReport> cut = Materialize(first, [&](const MaterializeProgress& p) {
    if (p.stored_bytes > 0) cancel.store(true);  // once the first shard is made
  });
  ASSERT_TRUE(absl::IsCancelled(cut.status())) << cut.status();

  Server a = StartServer(root_.path(), 0);
  MaterializeConfig rest = Config("mixed");
  rest.remote = On({a.address});
  rest.shard_samples = 8;
  rest.batch_size = 3;  // lowered to 2: batches tile the recorded 8-sample shards
  absl::StatusOr<MaterializeReport> finished = Materialize(rest);
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_GE(finished->shards_resumed, 1);
  ExpectSameOutput(*local, *finished);
}

TEST_F(RemoteMakerTest, AServerKilledMidRunLosesNothingAndDuplicatesNothing) {
  absl::StatusOr<MaterializeReport> local = Materialize(Config("local"));
  ASSERT_TRUE(local.ok()) << local.status();

  // Both slow enough that the run lasts seconds; one is SIGKILLed (no
  // goodbye) once a third of the samples are in: its batches go to the other.
  Server a = StartServer(root_.path(), 60), b = StartServer(root_.path(), 60);
  MaterializeConfig config = Config("remote");
  config.remote = On({a.address, b.address});
  bool killed = false;
  absl::StatusOr<MaterializeReport> remote = Materialize(config, [&](const MaterializeProgress& p) {
    if (!killed && p.done >= 8) {
      b.process->Signal(SIGKILL);
      killed = true;
    }
  });
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_TRUE(killed);
  ExpectSameOutput(*local, *remote);
}

TEST_F(RemoteMakerTest, ARunInterruptedOnTheServersIsFinishedByLocalWorkers) {
  absl::StatusOr<MaterializeReport> local = Materialize(Config("local"));
  ASSERT_TRUE(local.ok()) << local.status();

  Server a = StartServer(root_.path(), 30);
  std::atomic<bool> cancel{false};
  MaterializeConfig config = Config("mixed");
  config.remote = On({a.address});
  config.cancel = &cancel;
  absl::StatusOr<MaterializeReport> first = Materialize(config, [&](const MaterializeProgress& p) {
    if (p.done >= 7) cancel.store(true);  // after the first shard
  });
  ASSERT_TRUE(absl::IsCancelled(first.status())) << first.status();
  EXPECT_TRUE(fs::exists(root_.path() / "mixed.partial" / "shard-000000.tar"));

  absl::StatusOr<MaterializeReport> rest = Materialize(Config("mixed"));  // local workers
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_GE(rest->shards_resumed, 1);
  ExpectSameOutput(*local, *rest);
}

TEST_F(RemoteMakerTest, RefusalsComeBackNamed) {
  Server a = StartServer(root_.path(), 0);
  MaterializeConfig config = Config("refused");
  config.remote = On({a.address});
  config.dataset = "missing";
  absl::StatusOr<MaterializeReport> r = Materialize(config);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();

  ASSERT_TRUE(Materialize(Config("stored")).ok());
  config.dataset = "stored";  // materialised already
  r = Materialize(config);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_NE(r.status().message().find("materialised already"), std::string::npos) << r.status();
  EXPECT_FALSE(fs::exists(root_.path() / "refused"));
}

// The server core's own checks on a materialising session.
TEST(StoreSessionTest, BadSettingsAreRefusedNamingTheField) {
  testing::TempDir root;
  testing::ImageSetOptions o;
  o.classes = 1;
  o.per_class = 2;
  ASSERT_TRUE(testing::WriteImageFolder(root.path() / "d", o).ok());
  prometheus::Registry registry;
  ServerMetrics metrics(registry);
  CoreConfig cc;
  cc.data_root = root.path();
  DataServiceCore core(cc, &metrics);
  auto session = [](const std::string& pipeline, const std::string& format) {
    v1::SessionConfig c;
    c.set_dataset("d");
    c.set_batch_size(2);
    const std::vector<v1::Op> ops = *ParsePipelineText(pipeline);
    for (const v1::Op& op : ops) *c.add_pipeline() = op;
    c.mutable_store()->set_format(format);
    return c;
  };
  struct Case {
    v1::SessionConfig config;
    std::string needle;
  };
  std::vector<Case> cases = {
      {session("resize(64), random_horizontal_flip(0.5)", "raw"), "random_horizontal_flip"},
      {session("resize(64)", "webp"), "webp"},
      {session("center_crop(32), normalize(mean=0.5:0.5:0.5, std=0.2:0.2:0.2)", "png"), "raw only"},
  };
  cases.push_back({session("resize(64)", "raw"), "cache_mode"});
  cases.back().config.set_cache_mode(v1::CACHE_DECODED);
  cases.push_back({session("resize(64)", "raw"), "dtype"});
  cases.back().config.set_dtype(v1::FLOAT32);
  for (const Case& c : cases) {
    DataServiceCore::SessionOrError s = core.StartSession(c.config);
    ASSERT_FALSE(s.ok()) << c.needle;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
    EXPECT_NE(s.status().message().find(c.needle), std::string::npos) << s.status();
  }
  // A good one: variable-size samples with their sizes.
  DataServiceCore::SessionOrError s = core.StartSession(session("resize(40)", "raw"));
  ASSERT_TRUE(s.ok()) << s.status();
  v1::BatchRequest request;
  request.add_sample_indices(0);
  request.add_sample_indices(1);
  absl::Notification done;
  FinishedBatch got;
  ASSERT_TRUE((*s)->Submit(request,
                           [&](FinishedBatch b) {
                             got = std::move(b);
                             done.Notify();
                           })
                  .ok());
  done.WaitForNotification();
  ASSERT_TRUE(got.status.ok()) << got.status;
  ASSERT_EQ(got.header.sample_sizes_size(), 2);
  EXPECT_EQ(got.header.shape_size(), 1);
  EXPECT_EQ(got.header.sample_sizes(0) + got.header.sample_sizes(1), got.header.total_bytes());
  EXPECT_EQ(static_cast<int64_t>(got.data->size()), got.header.total_bytes());
  EXPECT_EQ(got.data->substr(0, 6), "\x93NUMPY");
}

}  // namespace
}  // namespace stoker
