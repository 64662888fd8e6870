// Builds the wire bytes of a stoker.v1.BatchChunk (see stoker.proto) as a
// gRPC byte buffer without copying the payload: the message's fields other
// than `data` are serialized into a small first slice, followed by the data
// field's tag and length, and the payload is a second slice that refers to the
// shared chunk memory, kept alive until gRPC releases it. The bytes are a
// valid BatchChunk for any protobuf parser. Thread-safe (pure function).
#ifndef STOKER_SERVER_CHUNK_ENCODER_H_
#define STOKER_SERVER_CHUNK_ENCODER_H_

#include <memory>
#include <string>

#include <grpcpp/support/byte_buffer.h>

#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// `chunk` must not have data set; bytes [offset, offset + length) of
// `payload` become its data field.
grpc::ByteBuffer EncodeChunk(const v1::BatchChunk& chunk, std::shared_ptr<const std::string> payload, size_t offset,
                             size_t length);

}  // namespace stoker

#endif  // STOKER_SERVER_CHUNK_ENCODER_H_
