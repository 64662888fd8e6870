// In-process cluster on real gRPC (127.0.0.1, ephemeral port): every kind of
// bad request gets its status code and a message naming the problem, and the
// server keeps serving afterwards.
#include <grpcpp/grpcpp.h>

#include "client/stoker_client.h"
#include "common/pipeline_text.h"
#include "gtest/gtest.h"
#include "server/stoker_server.h"
#include "tests/testdata/image_set.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TempDir;

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::ImageSetOptions o;
    o.classes = 2;
    o.per_class = 5;
    o.max_side = 120;
    o.min_side = 60;
    ASSERT_TRUE(testing::WriteImageFolder(root_.path() / "ds", o).ok());
    root_.Write("ds/class_000/zz_corrupt.jpg", "this is not an image");
    outside_.Write("secret/cls/a.jpg", testing::EncodeJpeg(testing::SyntheticImage(32, 32, 1), 90));
    std::filesystem::create_directory_symlink(outside_.path() / "secret", root_.path() / "escape");
    registry_ = std::make_shared<prometheus::Registry>();
    metrics_ = std::make_unique<ServerMetrics>(*registry_);
    ServerConfig config;
    config.host = "127.0.0.1";
    config.core.data_root = root_.path();
    config.core.workers = 2;
    auto server = StokerServer::Start(config, metrics_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    address_ = "127.0.0.1:" + std::to_string(server_->port());
    channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
    stub_ = v1::DataService::NewStub(channel_);
  }

  v1::SessionConfig Good() {
    v1::SessionConfig c;
    c.set_dataset("ds");
    c.set_batch_size(4);
    c.add_pipeline()->mutable_center_crop()->set_size(32);
    return c;
  }

  grpc::Status Open(const v1::SessionConfig& c, v1::OpenSessionResponse* response = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::OpenSessionRequest req;
    *req.mutable_config() = c;
    v1::OpenSessionResponse ignored;
    return stub_->OpenSession(&ctx, req, response ? response : &ignored);
  }

  // The server still answers: a good session opens.
  void ExpectStillServing() {
    v1::OpenSessionResponse info;
    ASSERT_TRUE(Open(Good(), &info).ok());
    EXPECT_EQ(info.num_samples(), 11);
  }

  // Runs one stream with the given messages; returns its final status.
  grpc::Status Stream(const std::vector<v1::StreamRequest>& messages, int* batches_received = nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto rpc = stub_->BatchStream(&ctx);
    for (const auto& m : messages) rpc->Write(m);
    rpc->WritesDone();
    v1::BatchChunk chunk;
    int headers = 0;
    while (rpc->Read(&chunk)) headers += chunk.has_header();
    if (batches_received) *batches_received = headers;
    return rpc->Finish();
  }

  TempDir root_, outside_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<StokerServer> server_;
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::DataService::Stub> stub_;
};

TEST_F(BadInputTest, OpenSessionErrorsCarryCodeAndReason) {
  struct Case {
    std::string name;
    v1::SessionConfig config;
    grpc::StatusCode code;
    std::string fragment;
  };
  std::vector<Case> cases;
  auto with = [&](std::string name, auto edit, grpc::StatusCode code, std::string fragment) {
    v1::SessionConfig c = Good();
    edit(c);
    cases.push_back({std::move(name), c, code, std::move(fragment)});
  };
  with("unknown dataset", [](auto& c) { c.set_dataset("imagenet"); }, grpc::NOT_FOUND, "'imagenet'");
  with("dot-dot", [](auto& c) { c.set_dataset("../etc"); }, grpc::PERMISSION_DENIED, "..");
  with("absolute", [](auto& c) { c.set_dataset("/etc"); }, grpc::PERMISSION_DENIED, "absolute");
  with("symlink out", [](auto& c) { c.set_dataset("escape"); }, grpc::PERMISSION_DENIED, "outside --data-root");
  with("batch size 0", [](auto& c) { c.set_batch_size(0); }, grpc::INVALID_ARGUMENT, "batch_size = 0; allowed range is 1..65536");
  with("batch size huge", [](auto& c) { c.set_batch_size(1 << 20); }, grpc::INVALID_ARGUMENT, "batch_size");
  with("crop size", [](auto& c) { c.mutable_pipeline(0)->mutable_center_crop()->set_size(-3); },
       grpc::INVALID_ARGUMENT, "pipeline[0].center_crop.size = -3");
  with("not fixed", [](auto& c) { c.mutable_pipeline(0)->mutable_resize()->set_shorter_side(64); },
       grpc::INVALID_ARGUMENT, "not fixed");
  with("flip p", [](auto& c) { c.add_pipeline()->mutable_random_horizontal_flip()->set_p(2); },
       grpc::INVALID_ARGUMENT, "pipeline[1].random_horizontal_flip.p");
  for (const Case& c : cases) {
    grpc::Status s = Open(c.config);
    EXPECT_EQ(s.error_code(), c.code) << c.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(c.fragment), std::string::npos) << c.name << ": " << s.error_message();
    ExpectStillServing();
  }
}

TEST_F(BadInputTest, StreamRefusesBadRequestsAndKeepsServing) {
  v1::StreamRequest config, batch, bad_index, too_many;
  *config.mutable_config() = Good();
  batch.mutable_batch()->add_sample_indices(0);
  bad_index.mutable_batch()->add_sample_indices(11);
  for (int i = 0; i < 5; ++i) too_many.mutable_batch()->add_sample_indices(i);
  v1::StreamRequest bad_config;
  *bad_config.mutable_config() = Good();
  bad_config.mutable_config()->set_dataset("nope");

  grpc::Status s = Stream({batch});
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("first message"), std::string::npos) << s.error_message();
  s = Stream({bad_config, batch});
  EXPECT_EQ(s.error_code(), grpc::NOT_FOUND) << s.error_message();
  s = Stream({config, bad_index});
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("sample index 11 out of range 0..10"), std::string::npos) << s.error_message();
  s = Stream({config, too_many});
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("allowed 1..batch_size (4)"), std::string::npos) << s.error_message();
  // A good batch before a bad one still arrives.
  int received = 0;
  s = Stream({config, batch, bad_index}, &received);
  EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT);
  EXPECT_EQ(received, 1);
  s = Stream({config, batch}, &received);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(received, 1);
  ExpectStillServing();
}

TEST_F(BadInputTest, UndecodableFileIsReportedAndItsBatchStillArrives) {
  ClientConfig config;
  config.servers = {address_};
  config.session = Good();
  auto client = StokerClient::Connect(config, nullptr);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->StartEpoch(0).ok());
  // Sorted samples: class_000 has img_0000..img_0004 then zz_corrupt.jpg (index 5).
  int64_t seen = 0, failed = 0;
  for (;;) {
    Batch b;
    bool end = false;
    ASSERT_TRUE((*client)->Next(&b, &end).ok());
    if (end) break;
    seen += static_cast<int64_t>(b.sample_indices.size());
    for (const v1::FailedSample& f : b.failed_samples) {
      ++failed;
      EXPECT_EQ(f.sample_index(), 5);
      EXPECT_EQ(f.path(), "class_000/zz_corrupt.jpg");
      EXPECT_NE(f.reason().find("decode"), std::string::npos) << f.reason();
      // Its slot is zeros.
      size_t slot = 0;
      while (b.sample_indices[slot] != 5) ++slot;
      const size_t sample_bytes = 32 * 32 * 3;
      EXPECT_EQ(b.data.view().substr(slot * sample_bytes, sample_bytes), std::string(sample_bytes, '\0'));
    }
  }
  EXPECT_EQ(seen, 11);
  EXPECT_EQ(failed, 1);
  ExpectStillServing();
}

}  // namespace
}  // namespace stoker
