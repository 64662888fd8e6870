#include "client/stoker_client.h"

#include "absl/strings/str_cat.h"
#include "client/epoch_run.h"
#include "common/epoch_plan.h"

namespace stoker {

// Load-bearing: a chunk is about 1 MiB of whole samples, so one very large
// sample can make a chunk large; the server sends at most 64 MiB.
constexpr int kMaxChunkMessageBytes = 64 << 20;
constexpr int kHttp2MaxFrameBytes = (1 << 24) - 1;  // the largest HTTP/2 allows
constexpr int kStreamLookaheadBytes = 16 << 20;

StokerClient::StokerClient(ClientConfig config, ClientMetrics* metrics)
    : config_(std::move(config)), metrics_(metrics) {}

StokerClient::~StokerClient() = default;

absl::StatusOr<std::unique_ptr<StokerClient>> StokerClient::Connect(ClientConfig config, ClientMetrics* metrics) {
  if (config.servers.empty()) return absl::InvalidArgumentError("no servers given");
  std::unique_ptr<StokerClient> client(new StokerClient(std::move(config), metrics));
  const ClientConfig& c = client->config_;
  v1::OpenSessionRequest request;
  *request.mutable_config() = c.session;
  for (const std::string& address : c.servers) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxChunkMessageBytes);
    // Notice a dead peer in seconds, not minutes.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    // Batches are tens of MB: let the server send large HTTP/2 frames and keep
    // several MB in flight without waiting for window updates.
    args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, kHttp2MaxFrameBytes);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamLookaheadBytes);
    auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    Server server{address, channel, v1::DataService::NewStub(channel)};
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + c.rpc_timeout));
    context.set_wait_for_ready(true);  // ride out a server that is still starting
    v1::OpenSessionResponse response;
    grpc::Status status = server.stub->OpenSession(&context, request, &response);
    if (!status.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat("server ", address, ": ", status.error_message()));
    }
    if (client->servers_.empty()) {
      client->dataset_ = response;
    } else if (response.num_samples() != client->dataset_.num_samples() ||
               response.sample_bytes() != client->dataset_.sample_bytes() ||
               response.class_names_size() != client->dataset_.class_names_size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "servers disagree on dataset '", c.session.dataset(), "': ", c.servers[0], " has ",
          client->dataset_.num_samples(), " samples in ", client->dataset_.class_names_size(), " classes of ",
          client->dataset_.sample_bytes(), " bytes, ", address, " has ", response.num_samples(), " in ",
          response.class_names_size(), " of ", response.sample_bytes()));
    }
    client->servers_.push_back(std::move(server));
  }
  return client;
}

int64_t StokerClient::BatchesPerEpoch() const {
  const int64_t n = dataset_.num_samples(), b = config_.session.batch_size();
  return config_.drop_last ? n / b : (n + b - 1) / b;
}

absl::Status StokerClient::StartEpoch(int64_t epoch) {
  if (epoch < 0) return absl::InvalidArgumentError(absl::StrCat("epoch = ", epoch, "; must be >= 0"));
  epoch_.reset();
  EpochPlan plan(config_.session.seed(), epoch, dataset_.num_samples(), config_.session.batch_size(),
                 config_.drop_last);
  std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> servers;
  for (Server& s : servers_) servers.emplace_back(s.address, s.channel);
  EpochRunOptions options;
  options.window = std::max(1, config_.window_per_server);
  options.prefetch = config_.prefetch_batches > 0 ? config_.prefetch_batches
                                                  : options.window * static_cast<int>(servers_.size());
  options.stream_timeout = config_.stream_timeout;
  // Enough free buffers for everything the epoch may hold at once, plus the
  // batch the caller is using.
  if (!buffers_) buffers_ = HostBufferPool::Create(options.prefetch + 2);
  options.buffers = buffers_;
  options.sample_bytes = dataset_.sample_bytes();
  epoch_ = std::make_unique<EpochRun>(config_.session, std::move(plan), servers, options, metrics_);
  return absl::OkStatus();
}

absl::Status StokerClient::Next(Batch* batch, bool* end_of_epoch) {
  if (!epoch_) return absl::FailedPreconditionError("Next() before StartEpoch()");
  return epoch_->Next(batch, end_of_epoch);
}

}  // namespace stoker
