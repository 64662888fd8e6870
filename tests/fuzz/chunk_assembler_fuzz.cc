// The client's chunk and header assembly (review 1.7), and staging what it
// assembles on the CPU path: any sequence of messages from a hostile server.
// The input is split into messages by 2-byte little-endian lengths.
#include <cstdint>
#include <string>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "client/chunk_assembler.h"
#include "client/device/device_stager.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* stager = [] {
    stoker::DeviceOptions o;
    o.device = stoker::DeviceOptions::Device::kCpu;
    o.type = stoker::TensorType::kFloat16;
    return stoker::DeviceStager::Create(o, nullptr)->release();
  }();
  // What the client's header check guarantees at most: a bounded size.
  stoker::ChunkAssembler assembler("fuzz", nullptr, [](const stoker::v1::BatchHeader& h) {
    return h.total_bytes() <= (1 << 20) && h.field_bytes() <= (1 << 20) ? absl::OkStatus()
                                                                        : absl::DataLossError("too big");
  });
  size_t pos = 0;
  while (pos + 2 <= size) {
    const size_t len = std::min<size_t>(data[pos] | (data[pos + 1] << 8), size - pos - 2);
    grpc::Slice slice(data + pos + 2, len);
    grpc::ByteBuffer buffer(&slice, 1);
    pos += 2 + len;
    auto batch = assembler.Add(&buffer);
    if (!batch.ok()) return 0;
    if (batch->has_value()) {
      auto staged = stager->Stage(**std::move(batch));
      if (staged.ok()) staged->Release(nullptr);
    }
  }
  return 0;
}
