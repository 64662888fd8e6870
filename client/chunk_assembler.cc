#include "client/chunk_assembler.h"

#include <algorithm>
#include <climits>
#include <new>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace stoker {
namespace {

// BatchChunk field numbers. Load-bearing: must match stoker.proto.
constexpr int kHeaderField = 1, kBatchIndexField = 2, kOffsetField = 3, kDataField = 4, kDrainingField = 5;
// A header is small; this bounds what a broken peer can make us allocate.
constexpr uint32_t kMaxHeaderBytes = 16 << 20;
// The server refuses image buffers over 2 GiB (pipeline.h). A field region
// may be larger (a batch of masks): with a header check (the session's
// bound, MaxSampleFieldBytes per sample) it is carried whole; without one,
// 2 GiB bounds what a broken peer can make us allocate.
constexpr int64_t kMaxBatchBytes = int64_t{2} << 30;

// The payload that marks LocalOutOfMemory. Load-bearing only in-process.
constexpr char kLocalOutOfMemory[] = "stoker.dev/client-out-of-memory";

}  // namespace

absl::Status LocalOutOfMemory(absl::string_view what) {
  absl::Status s = absl::ResourceExhaustedError(absl::StrCat(
      what, ": out of memory (an address-space, data or cgroup limit); ask for smaller batches or fewer in flight"));
  s.SetPayload(kLocalOutOfMemory, absl::Cord("1"));
  return s;
}

bool IsLocalOutOfMemory(const absl::Status& status) { return status.GetPayload(kLocalOutOfMemory).has_value(); }

absl::Status ChunkAssembler::StartBatch(const v1::BatchHeader& h) {
  if (h.total_bytes() < 0 || h.total_bytes() > kMaxBatchBytes || h.field_bytes() < 0 ||
      (!check_ && h.field_bytes() > kMaxBatchBytes)) {
    return absl::DataLossError(absl::StrCat("server ", server_, ": batch ", h.batch_index(), " claims ",
                                            h.total_bytes(), " bytes and ", h.field_bytes(), " field bytes"));
  }
  if (check_) {
    if (absl::Status s = check_(h); !s.ok()) {
      return absl::DataLossError(absl::StrCat("server ", server_, ": ", s.message()));
    }
  }
  Batch& b = batch_.emplace();
  FillBatchFromHeader(h, server_, &b);
  const size_t size = static_cast<size_t>(h.total_bytes());
  try {
    b.data = pool_ ? pool_->Get(size) : HostBuffer(size);
    if (size > 0 && b.data.data() == nullptr) throw std::bad_alloc();
    b.field_data.resize(static_cast<size_t>(h.field_bytes()));
  } catch (const std::bad_alloc&) {
    batch_.reset();
    return LocalOutOfMemory(absl::StrCat("this process cannot allocate batch ", h.batch_index(), " (", h.total_bytes(),
                                         " bytes and ", h.field_bytes(), " of fields) from server ", server_));
  }
  received_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Batch>> ChunkAssembler::Add(grpc::ByteBuffer* buffer) {
  grpc::ProtoBufferReader reader(buffer);
  google::protobuf::io::CodedInputStream in(&reader);
  int64_t batch_index = 0, offset = 0;  // proto3: absent means 0
  auto bad = [&](const std::string& what) {
    batch_.reset();
    return absl::DataLossError(absl::StrCat("server ", server_, " sent a bad chunk: ", what));
  };
  using google::protobuf::internal::WireFormatLite;
  while (const uint32_t tag = in.ReadTag()) {
    const int field = static_cast<int>(tag >> 3);
    const auto wire_type = WireFormatLite::GetTagWireType(tag);
    const bool delimited = wire_type == WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    const bool varint = wire_type == WireFormatLite::WIRETYPE_VARINT;
    if ((field == kHeaderField || field == kDataField) && !delimited)
      return bad(absl::StrCat("field ", field, " is not length-delimited"));
    if ((field == kBatchIndexField || field == kOffsetField || field == kDrainingField) && !varint) {
      return bad(absl::StrCat("field ", field, " is not a varint"));
    }
    if (field == kHeaderField) {
      uint32_t size;
      if (!in.ReadVarint32(&size) || size > kMaxHeaderBytes) return bad("header length");
      std::string bytes;
      v1::BatchHeader header;
      if (!in.ReadString(&bytes, static_cast<int>(size)) || !header.ParseFromString(bytes)) return bad("header");
      if (batch_)
        return bad(absl::StrCat("header of batch ", header.batch_index(), " inside batch ", batch_->batch_index));
      if (absl::Status s = StartBatch(header); !s.ok()) return s;
    } else if (field == kDrainingField) {
      uint64_t v;
      if (!in.ReadVarint64(&v)) return bad("varint");
      if (v != 0) draining_ = true;
    } else if (field == kBatchIndexField || field == kOffsetField) {
      uint64_t v;
      if (!in.ReadVarint64(&v)) return bad("varint");
      (field == kBatchIndexField ? batch_index : offset) = static_cast<int64_t>(v);
    } else if (field == kDataField) {
      uint64_t size;
      if (!in.ReadVarint64(&size)) return bad("data length");
      if (!batch_ && size == 0) continue;  // e.g. a `draining` notice
      if (!batch_) return bad("data before any header");
      const uint64_t image = batch_->data.size();
      const uint64_t room = image + batch_->field_data.size() - static_cast<uint64_t>(received_);
      if (batch_index != batch_->batch_index || offset != received_ || size > room ||
          size > static_cast<uint64_t>(INT_MAX)) {
        return bad(absl::StrCat("chunk of batch ", batch_index, " at offset ", offset, " (", size,
                                " bytes) does not continue batch ", batch_->batch_index, " at ", received_));
      }
      // The one copy of the payload: received slices -> batch buffer (the
      // image bytes), then the field region after it.
      const uint64_t at = static_cast<uint64_t>(received_);
      const uint64_t to_image = at < image ? std::min<uint64_t>(size, image - at) : 0;
      if (to_image > 0 && !in.ReadRaw(batch_->data.data() + at, static_cast<int>(to_image)))
        return bad("truncated data");
      if (size > to_image &&
          !in.ReadRaw(batch_->field_data.data() + (at + to_image - image), static_cast<int>(size - to_image))) {
        return bad("truncated data");
      }
      received_ += static_cast<int64_t>(size);
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in, tag)) {
      return bad(absl::StrCat("unknown field ", field));
    }
  }
  if (!in.ConsumedEntireMessage()) return bad("trailing bytes");
  if (batch_ && received_ == static_cast<int64_t>(batch_->data.size() + batch_->field_data.size())) {
    std::optional<Batch> done = std::move(batch_);
    batch_.reset();
    return done;
  }
  return std::optional<Batch>();
}

}  // namespace stoker
