#include "server/chunk_encoder.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

TEST(ChunkEncoderTest, BytesParseAsTheSameBatchChunk) {
  v1::BatchChunk chunk;
  chunk.mutable_header()->set_batch_index(7);
  chunk.mutable_header()->add_sample_indices(3);
  chunk.mutable_header()->set_total_bytes(300000);
  chunk.set_batch_index(7);
  chunk.set_offset(0);
  std::string payload(300000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31);
  const grpc::ByteBuffer buffer = EncodeChunk(chunk, std::make_shared<const std::string>(payload), 0, payload.size());
  EXPECT_EQ(buffer.Length(), chunk.ByteSizeLong() + payload.size() + 1 + 3);  // tag + 3-byte varint

  v1::BatchChunk parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(buffer)));
  EXPECT_EQ(parsed.batch_index(), 7);
  EXPECT_EQ(parsed.header().sample_indices(0), 3);
  EXPECT_EQ(parsed.data(), payload);
}

TEST(ChunkEncoderTest, PayloadIsReferencedNotCopiedAndReleasedWithTheBuffer) {
  auto payload = std::make_shared<const std::string>(1 << 20, 'x');
  std::weak_ptr<const std::string> watch = payload;
  {
    const grpc::ByteBuffer buffer = EncodeChunk(v1::BatchChunk(), std::move(payload), 4096, 1000);
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(buffer.Dump(&slices).ok());
    ASSERT_EQ(slices.size(), 2u);
    EXPECT_EQ(reinterpret_cast<const char*>(slices[1].begin()), watch.lock()->data() + 4096);
    EXPECT_EQ(slices[1].size(), 1000u);
    EXPECT_FALSE(watch.expired());
  }
  EXPECT_TRUE(watch.expired());
}

TEST(ChunkEncoderTest, EmptyPayloadEncodesAnEmptyDataField) {
  v1::BatchChunk chunk;
  chunk.set_offset(5);
  v1::BatchChunk parsed;
  ASSERT_TRUE(parsed.ParseFromString(Flatten(EncodeChunk(chunk, std::make_shared<const std::string>(), 0, 0))));
  EXPECT_EQ(parsed.offset(), 5);
  EXPECT_TRUE(parsed.data().empty());
}

}  // namespace
}  // namespace stoker
