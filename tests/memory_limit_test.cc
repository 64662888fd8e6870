// A real stoker-server under an address-space limit (prlimit --as) and
// hostile clients: eight streams each asking for one batch just under the
// 1 GiB per-stream cap. With the default budget, which honours RLIMIT_AS,
// the requests past it are refused with RESOURCE_EXHAUSTED; with a budget
// set above what a tighter limit (4 GiB) allows, the allocation that fails fails its batch
// with RESOURCE_EXHAUSTED. Either way the server lives on and serves.
#include <grpcpp/grpcpp.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/stoker/v1/stoker.grpc.pb.h"
#include "tests/testdata/server_process.h"
#include "tests/testdata/subprocess.h"

namespace stoker {
namespace {

using ::stoker::testing::Subprocess;

constexpr int64_t kAddressSpace = int64_t{8} << 30;
// For the allocation that must fail: the server maps about 0.8 GiB at start
// (threads, libraries), which leaves room for three of the held batches at
// most, never the eight asked for. Under 8 GiB eight batches (7.5 GiB) came
// within what a machine's start-up maps of fitting, and once did.
constexpr int64_t kTightAddressSpace = int64_t{4} << 30;
constexpr int kSide = 8192;    // the largest crop: 8192 x 8192 x 3 = 201 MB a sample
constexpr int kHugeBatch = 5;  // 1,007 MB a batch: just under the 1 GiB per-stream cap
constexpr char kDataset[] = "synthetic:64x64:16";

using Server = testing::RunningServer;

Server StartLimited(const std::vector<std::string>& extra, int64_t address_space = kAddressSpace) {
  std::vector<std::string> flags = {"--workers=2", "--shutdown-grace-seconds=2"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return testing::StartServerProcess(STOKER_SERVER_BIN, std::filesystem::temp_directory_path(), flags,
                                     {"/usr/bin/prlimit", absl::StrCat("--as=", address_space)});
}

v1::SessionConfig Config(int side, int batch_size) {
  v1::SessionConfig c;
  c.set_dataset(kDataset);
  c.set_batch_size(batch_size);
  c.set_job("memory-limit-test");
  c.add_pipeline()->mutable_center_crop()->set_size(side);  // padded out past the image
  return c;
}

std::unique_ptr<v1::DataService::Stub> Stub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // the server's chunks are larger than gRPC's default 4 MiB
  return v1::DataService::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

struct StreamResult {
  grpc::Status status;
  int batches = 0;
};

// One stream asking for one batch; after `hold` (a client that does not
// read, so that the server holds what it made) reads and drops what comes.
StreamResult OneBatch(v1::DataService::Stub* stub, int side, int batch_size, int64_t batch_index,
                      absl::Duration hold = absl::ZeroDuration()) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto rpc = stub->BatchStream(&ctx);
  v1::StreamRequest config;
  *config.mutable_config() = Config(side, batch_size);
  v1::StreamRequest batch;
  batch.mutable_batch()->set_batch_index(batch_index);
  for (int i = 0; i < batch_size; ++i) batch.mutable_batch()->add_sample_indices((batch_index + i) % 16);
  rpc->Write(config);
  rpc->Write(batch);
  rpc->WritesDone();
  absl::SleepFor(hold);
  StreamResult r;
  v1::BatchChunk chunk;
  while (rpc->Read(&chunk)) r.batches += chunk.has_header();
  r.status = rpc->Finish();
  return r;
}

std::vector<StreamResult> EightHugeStreams(const std::string& address) {
  auto stub = Stub(address);
  std::vector<StreamResult> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back(
        [&, i] { results[static_cast<size_t>(i)] = OneBatch(stub.get(), kSide, kHugeBatch, i, absl::Seconds(8)); });
  }
  for (auto& t : threads) t.join();
  return results;
}

bool Running(Subprocess& p) { return absl::IsDeadlineExceeded(p.Wait(absl::ZeroDuration()).status()); }

// The server still opens sessions and sends an ordinary batch.
void ExpectServing(Server& server) {
  ASSERT_TRUE(Running(*server.process)) << "the server died";
  auto stub = Stub(server.address);
  const StreamResult small = OneBatch(stub.get(), 32, 1, 3);
  EXPECT_TRUE(small.status.ok()) << small.status.error_message();
  EXPECT_EQ(small.batches, 1);
  EXPECT_TRUE(Running(*server.process)) << "the server died";
}

bool HavePrlimit() { return std::filesystem::exists("/usr/bin/prlimit"); }

TEST(MemoryLimitTest, DefaultBudgetHonoursRlimitAsAndRefusesWhatWouldNotFit) {
  if (!HavePrlimit()) GTEST_SKIP() << "no /usr/bin/prlimit (util-linux)";
  Server server = StartLimited({});
  ASSERT_FALSE(server.address.empty());
  const std::vector<StreamResult> results = EightHugeStreams(server.address);
  int served = 0, refused = 0;
  for (const StreamResult& r : results) {
    if (r.status.ok() && r.batches == 1) {
      ++served;
    } else {
      EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << r.status.error_message();
      EXPECT_NE(r.status.error_message().find("--max-inflight-bytes"), std::string::npos) << r.status.error_message();
      ++refused;
    }
  }
  // Half of what 8 GiB leaves holds two or three such batches at once, never eight.
  EXPECT_GE(served, 1);
  EXPECT_GE(refused, 1);
  ExpectServing(server);
}

TEST(MemoryLimitTest, AnAllocationThatFailsFailsItsBatchNotTheServer) {
  if (!HavePrlimit()) GTEST_SKIP() << "no /usr/bin/prlimit (util-linux)";
  // A budget (16 GiB) the address-space limit (4 GiB) cannot honour: the
  // allocations themselves fail.
  Server server = StartLimited({absl::StrCat("--max-inflight-bytes=", int64_t{16} << 30)}, kTightAddressSpace);
  ASSERT_FALSE(server.address.empty());
  const std::vector<StreamResult> results = EightHugeStreams(server.address);
  int failed = 0;
  for (const StreamResult& r : results) {
    if (r.status.ok()) continue;
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << r.status.error_message();
    // The batch's buffer, or a sample's pixels inside OpenCV: whichever
    // allocation met the limit first.
    const std::string& m = r.status.error_message();
    EXPECT_TRUE(m.find("could not allocate") != std::string::npos || m.find("out of memory while") != std::string::npos)
        << m;
    ++failed;
  }
  EXPECT_GE(failed, 1) << "eight 1,007 MB batches fitted under a 4 GiB address space";
  ExpectServing(server);
}

}  // namespace
}  // namespace stoker
