// A running data server: the gRPC server (DataService, health checking,
// reflection) over a DataServiceCore. Start, then Shutdown and/or Wait from
// any thread; destroying it shuts it down.
#ifndef STOKER_SERVER_STOKER_SERVER_H_
#define STOKER_SERVER_STOKER_SERVER_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dataplane/sessions/data_service_core.h"
#include "server/data_service.h"
#include "server/server_security.h"

namespace stoker {

struct ServerConfig {
  std::string host = "0.0.0.0";
  int port = 0;  // 0 picks a free port
  ServerSecurityConfig security;
  CoreConfig core;
};

class StokerServer {
 public:
  // Binds and starts serving. UNAVAILABLE when the address cannot be bound;
  // INVALID_ARGUMENT naming the flag when the security files are unusable.
  // `metrics` must outlive the server.
  static absl::StatusOr<std::unique_ptr<StokerServer>> Start(ServerConfig config, ServerMetrics* metrics);
  ~StokerServer();

  int port() const { return port_; }
  // Stops accepting calls, marks health NOT_SERVING, lets open streams finish
  // until `deadline`, then cancels them.
  void Shutdown(absl::Time deadline);
  // Blocks until the server has shut down.
  void Wait();

 private:
  StokerServer() = default;

  std::unique_ptr<DataServiceCore> core_;
  std::unique_ptr<CallGate> gate_;
  std::unique_ptr<DataServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace stoker

#endif  // STOKER_SERVER_STOKER_SERVER_H_
