#include "server/chunk_encoder.h"

#include <google/protobuf/io/coded_stream.h>

#include <utility>

namespace stoker {
namespace {

// Field number of BatchChunk.data, wire type 2 (length-delimited).
// Load-bearing: must match stoker.proto.
constexpr uint32_t kDataTag = (4u << 3) | 2u;

void ReleasePayload(void* user_data) { delete static_cast<std::shared_ptr<const std::string>*>(user_data); }

}  // namespace

grpc::ByteBuffer EncodeChunk(const v1::BatchChunk& chunk, std::shared_ptr<const std::string> payload, size_t offset,
                             size_t length) {
  std::string prefix = chunk.SerializeAsString();
  uint8_t tag_and_length[16];
  uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(kDataTag, tag_and_length);
  end = google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(length, end);
  prefix.append(reinterpret_cast<const char*>(tag_and_length), static_cast<size_t>(end - tag_and_length));
  grpc::Slice slices[2] = {grpc::Slice(prefix), grpc::Slice()};
  size_t count = 1;
  if (length > 0) {
    void* data = const_cast<char*>(payload->data() + offset);
    slices[1] = grpc::Slice(data, length, &ReleasePayload, new std::shared_ptr<const std::string>(std::move(payload)));
    count = 2;
  }
  return grpc::ByteBuffer(slices, count);
}

}  // namespace stoker
