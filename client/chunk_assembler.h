// Reassembles batches from the BatchChunk messages of one stream (see
// stoker.proto), parsing each message straight from gRPC's byte buffer so that
// the payload is copied once, from the received slices into the batch's
// buffer. Thread-compatible: one stream's reader owns one assembler.
#ifndef STOKER_CLIENT_CHUNK_ASSEMBLER_H_
#define STOKER_CLIENT_CHUNK_ASSEMBLER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/support/byte_buffer.h>

#include "absl/status/statusor.h"
#include "client/batch.h"

namespace stoker {

// A batch this process could not allocate (RESOURCE_EXHAUSTED, marked so
// that the run ends instead of asking servers again): `what` ("this process
// cannot allocate batch 4 (...)") and what to do about it; and the test for it.
absl::Status LocalOutOfMemory(absl::string_view what);
bool IsLocalOutOfMemory(const absl::Status& status);

class ChunkAssembler {
 public:
  // Decides whether a batch's header is acceptable before its buffer is
  // allocated (what was requested, the session's shape and size).
  using HeaderCheck = std::function<absl::Status(const v1::BatchHeader&)>;

  // Batch buffers come from `pool` (null: plain allocations). `check` (may be
  // empty: only the size bound) sees every header first.
  ChunkAssembler(std::string server, std::shared_ptr<HostBufferPool> pool = nullptr, HeaderCheck check = {})
      : server_(std::move(server)), pool_(std::move(pool)), check_(std::move(check)) {}

  // Consumes one serialized BatchChunk. Returns the batch once its last byte
  // arrived, nullopt while it is incomplete. DATA_LOSS names the problem when
  // the chunk does not parse, its header fails the check, or it does not
  // continue the batch in progress.
  absl::StatusOr<std::optional<Batch>> Add(grpc::ByteBuffer* buffer);

  // True once the server said it is shutting down (a `draining` chunk).
  bool draining() const { return draining_; }

 private:
  absl::Status StartBatch(const v1::BatchHeader& header);

  const std::string server_;
  const std::shared_ptr<HostBufferPool> pool_;
  const HeaderCheck check_;
  std::optional<Batch> batch_;  // in progress
  int64_t received_ = 0;
  bool draining_ = false;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_CHUNK_ASSEMBLER_H_
