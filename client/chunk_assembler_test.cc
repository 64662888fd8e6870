#include "client/chunk_assembler.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

grpc::ByteBuffer Serialize(const v1::BatchChunk& chunk) {
  const std::string bytes = chunk.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

v1::BatchChunk Chunk(int64_t batch, int64_t offset, const std::string& data, int64_t total = -1) {
  v1::BatchChunk c;
  if (total >= 0) {
    v1::BatchHeader* h = c.mutable_header();
    h->set_epoch(2);
    h->set_batch_index(batch);
    h->add_sample_indices(11);
    h->add_sample_indices(12);
    h->add_labels(1);
    h->add_labels(0);
    h->add_shape(2);
    h->add_shape(3);
    h->set_total_bytes(total);
  }
  c.set_batch_index(batch);
  c.set_offset(offset);
  c.set_data(data);
  return c;
}

TEST(ChunkAssemblerTest, JoinsChunksInOrderIntoOneBatch) {
  ChunkAssembler a("s:1");
  grpc::ByteBuffer b1 = Serialize(Chunk(4, 0, "abc", 6)), b2 = Serialize(Chunk(4, 3, "def"));
  auto first = a.Add(&b1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->has_value());
  auto second = a.Add(&b2);
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(second->has_value());
  const Batch& batch = **second;
  EXPECT_EQ(batch.data.view(), "abcdef");
  EXPECT_EQ(batch.epoch, 2);
  EXPECT_EQ(batch.batch_index, 4);
  EXPECT_EQ(batch.sample_indices, (std::vector<int64_t>{11, 12}));
  EXPECT_EQ(batch.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(batch.server, "s:1");

  // The next batch starts cleanly.
  grpc::ByteBuffer b3 = Serialize(Chunk(5, 0, "xy", 2));
  auto third = a.Add(&b3);
  ASSERT_TRUE(third.ok() && third->has_value());
  EXPECT_EQ((*third)->data.view(), "xy");
}

TEST(ChunkAssemblerTest, FieldBytesAfterTheImageGoToTheFieldRegion) {
  ChunkAssembler a("s:1");
  // 6 image bytes then 5 field bytes, in chunks that straddle the boundary.
  v1::BatchChunk first = Chunk(4, 0, "abcd", 6);
  first.mutable_header()->set_field_bytes(5);
  v1::FieldData* f = first.mutable_header()->add_fields();
  f->set_name("caption");
  f->set_kind(v1::TEXT);
  f->set_bytes(5);
  for (int64_t o : {0, 2, 5}) f->add_sample_offsets(o);
  grpc::ByteBuffer b1 = Serialize(first), b2 = Serialize(Chunk(4, 4, "efHI")), b3 = Serialize(Chunk(4, 8, "abc"));
  ASSERT_TRUE(a.Add(&b1).ok());
  auto partial = a.Add(&b2);
  ASSERT_TRUE(partial.ok() && !partial->has_value());
  auto done = a.Add(&b3);
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_TRUE(done->has_value());
  const Batch& batch = **done;
  EXPECT_EQ(batch.data.view(), "abcdef");
  EXPECT_EQ(batch.field_data, "HIabc");
  ASSERT_NE(batch.Field("caption"), nullptr);
  EXPECT_EQ(batch.Field("other"), nullptr);
  EXPECT_EQ(batch.FieldValue(*batch.Field("caption"), 0), "HI");
  EXPECT_EQ(batch.FieldValue(*batch.Field("caption"), 1), "abc");
  // More bytes than image + fields is refused.
  ChunkAssembler b("s:1");
  grpc::ByteBuffer c1 = Serialize(first), c2 = Serialize(Chunk(4, 4, "efHIabcX"));
  ASSERT_TRUE(b.Add(&c1).ok());
  EXPECT_EQ(b.Add(&c2).status().code(), absl::StatusCode::kDataLoss);
}

TEST(ChunkAssemblerTest, RefusesChunksThatDoNotContinueTheBatch) {
  struct Case {
    std::vector<v1::BatchChunk> chunks;
    std::string fragment;
  };
  const Case cases[] = {
      {{Chunk(1, 0, "ab")}, "data before any header"},
      {{Chunk(1, 0, "ab", 4), Chunk(1, 1, "cd")}, "does not continue"},
      {{Chunk(1, 0, "ab", 4), Chunk(2, 2, "cd")}, "does not continue"},
      {{Chunk(1, 0, "ab", 3), Chunk(1, 2, "cd")}, "does not continue"},
      {{Chunk(1, 0, "ab", 4), Chunk(2, 0, "", 4)}, "inside batch 1"},
  };
  for (const Case& c : cases) {
    ChunkAssembler a("s:1");
    absl::Status last;
    for (const auto& chunk : c.chunks) {
      grpc::ByteBuffer b = Serialize(chunk);
      last = a.Add(&b).status();
      if (!last.ok()) break;
    }
    EXPECT_EQ(last.code(), absl::StatusCode::kDataLoss) << c.fragment;
    EXPECT_NE(last.message().find(c.fragment), std::string::npos) << last;
  }
}

grpc::ByteBuffer Raw(const std::vector<std::string>& slices) {
  std::vector<grpc::Slice> s;
  for (const auto& bytes : slices) s.emplace_back(bytes);
  return grpc::ByteBuffer(s.data(), s.size());
}

TEST(ChunkAssemblerTest, ParsesAcrossSlicesAsTheServerSendsThem) {
  // The server sends the fields in one slice and the payload in another.
  const std::string fields = Chunk(0, 0, "", 6).SerializeAsString();
  ChunkAssembler a("s:1");
  grpc::ByteBuffer b = Raw({fields + std::string("\x22\x06", 2), "abc", "def"});
  auto batch = a.Add(&b);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->has_value());
  EXPECT_EQ((*batch)->data.view(), "abcdef");
}

TEST(ChunkAssemblerTest, HostileLengthsAndWireTypesAreRefused) {
  const std::string header = Chunk(0, 0, "", 100).SerializeAsString();
  const std::pair<std::string, std::string> cases[] = {
      // data length 2^64 - 1
      {header + std::string("\x22\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11), "does not continue"},
      // data length larger than the batch
      {header + std::string("\x22\xc8\x01", 3) + std::string(200, 'x'), "does not continue"},
      // data length longer than what follows
      {header + std::string("\x22\x50", 2) + std::string(10, 'x'), "truncated data"},
      // field 4 as a varint, field 2 as length-delimited
      {header + std::string("\x20\x05", 2), "not length-delimited"},
      {header + std::string("\x12\x01x", 3), "not a varint"},
  };
  for (const auto& [bytes, fragment] : cases) {
    ChunkAssembler a("s:1");
    grpc::ByteBuffer b = Raw({bytes});
    auto result = a.Add(&b);
    ASSERT_FALSE(result.ok()) << fragment;
    EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(result.status().message().find(fragment), std::string::npos) << result.status();
  }
}

TEST(ChunkAssemblerTest, GarbageBytesAreDataLoss) {
  ChunkAssembler a("s:1");
  grpc::Slice slice(std::string("\x0a\xff\xff\xff\xff\x0f", 6));
  grpc::ByteBuffer b(&slice, 1);
  EXPECT_EQ(a.Add(&b).status().code(), absl::StatusCode::kDataLoss);
}

// A field region over 2 GiB (a batch of masks) is the header check's to
// judge (the session's bound); without a check, 2 GiB bounds it.
TEST(ChunkAssemblerTest, AFieldRegionOver2GiBIsJudgedByTheSessionsCheck) {
  v1::BatchChunk c = Chunk(4, 0, "", 16);
  c.mutable_header()->set_field_bytes((int64_t{2} << 30) + 1);
  grpc::ByteBuffer b1 = Serialize(c), b2 = Serialize(c);
  ChunkAssembler unchecked("s");
  auto refused = unchecked.Add(&b1);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("claims 16 bytes and 2147483649 field bytes"), std::string::npos)
      << refused.status();
  ChunkAssembler checked("s", nullptr, [](const v1::BatchHeader& header) {
    return absl::DataLossError(absl::StrCat("the session allows ", header.field_bytes() - 1, " field bytes"));
  });
  auto judged = checked.Add(&b2);
  ASSERT_FALSE(judged.ok());
  EXPECT_NE(judged.status().message().find("the session allows 2147483648 field bytes"), std::string::npos)
      << judged.status();
}

// A batch buffer this process cannot allocate (an address-space limit) is
// LocalOutOfMemory naming the batch, not an exception out of gRPC's thread.
TEST(ChunkAssemblerTest, ABufferThatCannotBeAllocatedIsLocalOutOfMemory) {
  HostAllocator failing;
  failing.allocate = [](size_t, int) -> uint8_t* { throw std::bad_alloc(); };
  failing.release = [](uint8_t*, int) {};
  ChunkAssembler a("s:1", HostBufferPool::Create(2, failing));
  grpc::ByteBuffer b = Serialize(Chunk(4, 0, "abc", 6));
  auto batch = a.Add(&b);
  ASSERT_FALSE(batch.ok());
  EXPECT_TRUE(IsLocalOutOfMemory(batch.status())) << batch.status();
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(batch.status().message().find("this process cannot allocate batch 4 (6 bytes and 0 of fields) from server "
                                          "s:1: out of memory"),
            std::string::npos)
      << batch.status();
  EXPECT_FALSE(IsLocalOutOfMemory(absl::ResourceExhaustedError("the server is full")));
}

}  // namespace
}  // namespace stoker
