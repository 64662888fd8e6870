// stoker-health: asks a server's standard gRPC health service
// (grpc.health.v1.Health/Check) whether it serves. For container health
// checks and exec probes where the orchestrator has no gRPC probe of its own.
// Exit status: 0 SERVING, 1 answered but not serving, 2 no answer.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/security_flags.h"
#include "common/flag_names.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"

ABSL_FLAG(std::string, addr, "127.0.0.1:50051", "Server to ask, host:port");
ABSL_FLAG(std::string, service, "", "Service name to ask about; empty: the server as a whole");
ABSL_FLAG(double, timeout_seconds, 3, "Give up after this many seconds (exit 2)");

namespace stoker {
namespace {

// HealthCheckRequest { string service = 1; }
std::string EncodeRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.WriteTag((1 << 3) | 2);
  coded.WriteVarint32(static_cast<uint32_t>(service.size()));
  coded.WriteString(service);
  return out;
}

// HealthCheckResponse { ServingStatus status = 1; } (SERVING = 1); -1 if malformed.
int DecodeStatus(const std::string& bytes) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  int status = 0;  // proto3 default: UNKNOWN
  while (uint32_t tag = in.ReadTag()) {
    if (tag == (1 << 3)) {
      uint32_t v;
      if (!in.ReadVarint32(&v)) return -1;
      status = static_cast<int>(v);
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
      return -1;
    }
  }
  return status;
}

int Run() {
  const std::string addr = absl::GetFlag(FLAGS_addr);
  // The health service needs no token; TLS, where the server uses it, does.
  absl::StatusOr<PreparedSecurity> security = PrepareSecurity(SecurityFromFlags());
  if (!security.ok()) {
    std::fprintf(stderr, "stoker-health: %s\n", std::string(security.status().message()).c_str());
    return 2;
  }
  grpc::ChannelArguments args;
  security->Apply(&args);
  auto channel = grpc::CreateCustomChannel(addr, security->credentials, args);
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds))));
  const std::string request = EncodeRequest(absl::GetFlag(FLAGS_service));
  grpc::Slice slice(request);
  grpc::ByteBuffer request_buffer(&slice, 1), response_buffer;
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request_buffer, &response_buffer,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) {
    std::fprintf(stderr, "stoker-health: %s: %s\n", addr.c_str(), status.error_message().c_str());
    return 2;
  }
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response_buffer.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  const int serving = DecodeStatus(bytes);
  const char* names[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  const char* name = serving >= 0 && serving <= 3 ? names[serving] : "malformed answer";
  std::printf("%s: %s\n", addr.c_str(), name);
  return serving == 1 ? 0 : 1;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  stoker::ParseFlags(argc, argv,
                     "Asks a Stoker server's gRPC health service whether it serves (for container health checks).\n"
                     "Usage: stoker-health [--addr 127.0.0.1:50051] [--timeout-seconds 3]\n"
                     "Exit status: 0 serving, 1 not serving, 2 no answer.");
  return stoker::Run();
}
