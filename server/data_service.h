// gRPC shim for stoker.v1.DataService (see stoker.proto): translates protos
// and statuses and hands all work to DataServiceCore. Thread-safe; the core
// must outlive the service.
#ifndef STOKER_SERVER_DATA_SERVICE_H_
#define STOKER_SERVER_DATA_SERVICE_H_

#include <memory>

#include "dataplane/sessions/data_service_core.h"
#include "proto/stoker/v1/stoker.grpc.pb.h"
#include "server/server_security.h"

namespace stoker {

class StreamRegistry;

// BatchStream is registered raw (byte buffers) so that chunks go out without
// copying their payload (see chunk_encoder.h); the bytes on the wire are
// ordinary StreamRequest / BatchChunk messages.
class DataServiceImpl final : public v1::DataService::WithCallbackMethod_OpenSession<
                                  v1::DataService::WithRawCallbackMethod_BatchStream<v1::DataService::Service>> {
 public:
  // `gate` (nullable: every call admitted) checks tokens and per-client
  // stream limits before a call reaches the core; both must outlive this.
  DataServiceImpl(DataServiceCore* core, CallGate* gate);
  ~DataServiceImpl() override;

  // Tells every open stream that the server is shutting down: each sends its
  // client a `draining` chunk; the batches it has still go out.
  void Drain();

  grpc::ServerUnaryReactor* OpenSession(grpc::CallbackServerContext* context, const v1::OpenSessionRequest* request,
                                        v1::OpenSessionResponse* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* BatchStream(
      grpc::CallbackServerContext* context) override;

 private:
  DataServiceCore* const core_;
  CallGate* const gate_;
  std::unique_ptr<StreamRegistry> streams_;
};

// absl::Status -> grpc::Status, keeping code and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace stoker

#endif  // STOKER_SERVER_DATA_SERVICE_H_
