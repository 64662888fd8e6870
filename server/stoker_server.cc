#include "server/stoker_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"

namespace stoker {

// Load-bearing limits: requests carry at most kMaxBatchSize packed indices;
// chunks are about 1 MiB, so 64 MiB leaves room for large samples.
constexpr int kMaxRequestBytes = 4 << 20;
constexpr int kMaxChunkMessageBytes = 64 << 20;

absl::StatusOr<std::unique_ptr<StokerServer>> StokerServer::Start(ServerConfig config, ServerMetrics* metrics) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(config.security);
  if (!credentials.ok()) return credentials.status();
  absl::StatusOr<std::unique_ptr<CallGate>> gate = CallGate::Create(config.security);
  if (!gate.ok()) return gate.status();
  std::unique_ptr<StokerServer> s(new StokerServer());
  absl::StatusOr<std::unique_ptr<DataServiceCore>> core = DataServiceCore::Create(config.core, metrics);
  if (!core.ok()) return core.status();
  s->core_ = *std::move(core);
  s->gate_ = *std::move(gate);
  s->service_ = std::make_unique<DataServiceImpl>(s->core_.get(), s->gate_.get());

  // Health and reflection are not gated: probes carry no token, and
  // reflection describes only the public API (stoker.proto), no dataset.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address = absl::StrCat(config.host, ":", config.port);
  builder.AddListeningPort(address, *credentials, &s->port_);
  builder.RegisterService(s->service_.get());
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.SetMaxSendMessageSize(kMaxChunkMessageBytes);
  // Clients send keepalive pings every few seconds to notice dead servers;
  // accept them (gRPC's default would answer with GOAWAY "too many pings").
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);  // pings without data are expected
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || s->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  return s;
}

StokerServer::~StokerServer() {
  if (server_) {
    Shutdown(absl::Now());
    Wait();
  }
}

void StokerServer::Shutdown(absl::Time deadline) {
  if (auto* health = server_->GetHealthCheckService()) health->SetServingStatus(false);
  service_->Drain();     // clients stop sending work; batches in hand still go out
  core_->StopOpening();  // streams waiting for a dataset scan end now
  server_->Shutdown(absl::ToChronoTime(deadline));
}

void StokerServer::Wait() { server_->Wait(); }

}  // namespace stoker
