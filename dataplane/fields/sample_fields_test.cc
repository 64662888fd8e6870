// Sample fields beside the image: WebDataset members indexed and read by
// extension, values checked against their kind, and batches that carry them
// (values + offsets after the image buffer) through SKIP, FAIL and the
// session checks.
#include "dataplane/fields/sample_fields.h"

#include <fstream>

#include "absl/synchronization/notification.h"
#include "common/field_layout.h"
#include "common/field_spec.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/sessions/data_service_core.h"
#include "dataplane/sources/tar_shards.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "tests/testdata/image_set.h"
#include "tests/testdata/one_batch.h"
#include "tests/testdata/tar_writer.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {

using ::stoker::testing::TarArchive;
using ::stoker::testing::TempDir;

std::string Jpeg(uint64_t seed) { return testing::EncodeJpeg(testing::SyntheticImage(40, 48, seed), 90); }

// Six samples: s0..s5 with jpg, cls, txt, json; s3 has no txt, s4 a caption
// that is not UTF-8.
std::string Shard() {
  std::vector<std::pair<std::string, std::string>> members;
  for (int i = 0; i < 6; ++i) {
    const std::string key = "s" + std::to_string(i);
    members.push_back({key + ".jpg", Jpeg(static_cast<uint64_t>(i))});
    members.push_back({key + ".cls", std::to_string(i % 3)});
    if (i == 4) {
      members.push_back({key + ".txt", "caf\xc3"});  // a truncated UTF-8 sequence
    } else if (i != 3) {
      members.push_back({key + ".txt", "caption of " + key + " \xc3\xa9"});
    }
    members.push_back({key + ".json", "{\"i\": " + std::to_string(i) + "}"});
  }
  return TarArchive(members);
}

TEST(SampleFieldsTest, TarMembersAreReadByExtensionInTheOrderAsked) {
  TempDir dir;
  dir.Write("ds/a-000000.tar", TarArchive({{"k.jpg", "J"}, {"k.png", "P"}, {"k.txt", "T"}, {"k.seg.png", "S"}}));
  auto source = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(source.ok()) << source.status();
  std::string which;
  EXPECT_EQ(*(*source)->ReadField(0, {"png", "jpg"}, &which), "P");
  EXPECT_EQ(which, "png");
  EXPECT_EQ(*(*source)->ReadField(0, {"webp", "jpg"}, &which), "J");
  EXPECT_EQ(*(*source)->ReadField(0, {"seg.png"}, &which), "S");
  absl::StatusOr<std::string> missing = (*source)->ReadField(0, {"json"}, &which);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(DecodeFailureOf(missing.status()), DecodeFailure::kMissingField);
  EXPECT_NE(missing.status().message().find("a-000000.tar:k has no member json (it has jpg, png, txt, seg.png)"),
            std::string::npos)
      << missing.status();
  EXPECT_EQ((*source)->unlabeled_samples(), 1);
}

TEST(SampleFieldsTest, SidecarKeepsEveryMember) {
  TempDir dir;
  dir.Write("ds/a-000000.tar", Shard());
  auto first = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(std::filesystem::exists(dir.path() / "ds/a-000000.tar.stoker-index"));
  auto again = TarShardSource::Open(dir.path() / "ds");  // from the sidecar
  ASSERT_TRUE(again.ok());
  ASSERT_EQ((*again)->size(), 6);
  EXPECT_EQ((*again)->fingerprint(), (*first)->fingerprint());
  for (int64_t i = 0; i < 6; ++i) {
    for (const char* ext : {"json", "cls", "jpg"}) {
      EXPECT_EQ(*(*again)->ReadField(i, {ext}, nullptr), *(*first)->ReadField(i, {ext}, nullptr)) << i << ext;
    }
  }
  EXPECT_FALSE((*again)->ReadField(3, {"txt"}, nullptr).ok());
  EXPECT_EQ((*again)->unlabeled_samples(), 0);
}

TEST(SampleFieldsTest, DuplicateMembersKeepTheFirstAndHugeNamesAreSkipped) {
  TempDir dir;
  dir.Write("ds/a-000000.tar", TarArchive({{"k.jpg", "first"},
                                           {"k.jpg", "second"},
                                           {"k.txt", "t"},
                                           {std::string(kMaxTarMemberName + 1, 'n') + ".jpg", "long"},
                                           {"z.jpg", "Z"}}));
  absl::StatusOr<TarScan> scan = ScanTar(dir.path() / "ds/a-000000.tar");
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(scan->members.size(), 4u);
  EXPECT_EQ(scan->skipped, 1);
  EXPECT_NE(scan->first_skipped.find("member name of 1029 bytes"), std::string::npos) << scan->first_skipped;
  auto source = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(source.ok());
  ASSERT_EQ((*source)->size(), 2);  // k (once) and z
  EXPECT_EQ(*(*source)->Read(0), "first");
}

TEST(SampleFieldsTest, AKeyWithTooManyMembersKeepsTheFirstOnes) {
  TempDir dir;
  std::vector<std::pair<std::string, std::string>> members = {{"k.jpg", "J"}};
  for (int i = 0; i < kMaxMembersPerSample + 50; ++i) members.push_back({"k.m" + std::to_string(i), "x"});
  dir.Write("ds/a-000000.tar", TarArchive(members));
  auto source = TarShardSource::Open(dir.path() / "ds");
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_TRUE((*source)->ReadField(0, {"m0"}, nullptr).ok());
  EXPECT_FALSE((*source)->ReadField(0, {"m" + std::to_string(kMaxMembersPerSample + 10)}, nullptr).ok());
}

TEST(SampleFieldsTest, AnOversizedPaxRecordSkipsItsMemberByName) {
  TempDir dir;
  std::string tar = testing::TarPax({"path=" + std::string(kMaxTarRecordBytes + 10, 'p') + ".jpg"});
  tar += TarArchive({{"x.jpg", "X"}, {"y.jpg", "Y"}});
  dir.Write("ds/a-000000.tar", tar);
  absl::StatusOr<TarScan> scan = ScanTar(dir.path() / "ds/a-000000.tar");
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(scan->skipped, 1);
  EXPECT_NE(scan->first_skipped.find("pax record of"), std::string::npos) << scan->first_skipped;
  ASSERT_EQ(scan->members.size(), 1u);
  EXPECT_EQ(scan->members[0].name, "y.jpg");
}

TEST(SampleFieldsTest, JsonPathsAreExtractedAndTyped) {
  const std::string doc =
      R"({"a": {"score": 6.5, "n": 7, "big": 1e20, "huge": -1e300}, "tags": ["x", "y"], "ids": [3, 4], "s": "hi"})";
  struct Case {
    v1::FieldKind kind;
    const char* path;
    bool ok;
    std::string expected;
  } cases[] = {
      {v1::NUMBER, "a.score", true,
       [] {
         float f = 6.5f;
         return std::string(reinterpret_cast<char*>(&f), 4);
       }()},
      {v1::CLASS, "a.n", true, std::string("\x07\0\0\0", 4)},
      {v1::CLASSES, "ids", true, std::string("\x03\0\0\0\x04\0\0\0", 8)},
      {v1::TEXT, "tags.1", true, "y"},
      {v1::JSON, "tags", true, "[\"x\",\"y\"]"},
      {v1::TEXT, "a.missing", false, "without the path 'a.missing' (stops at 'missing')"},
      {v1::TEXT, "tags.5", false, "stops at '5'"},
      {v1::CLASS, "a.big", false, "holds number, not a 32-bit integer"},
      {v1::NUMBER, "s", false, "holds string, not a number"},
      // Issue 49: -1e300 was cast to float (undefined behaviour); now a bad field.
      {v1::NUMBER, "a.huge", false, "outside the range of a number field"},
      {v1::NUMBER, "a.big", true,
       [] {
         float f = 1e20f;
         return std::string(reinterpret_cast<char*>(&f), 4);
       }()},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> v = ExtractJsonField(c.kind, doc, c.path, "x.json");
    ASSERT_EQ(v.ok(), c.ok) << c.path << ": " << v.status();
    if (c.ok) {
      EXPECT_EQ(*v, c.expected) << c.path;
    } else {
      EXPECT_EQ(DecodeFailureOf(v.status()), DecodeFailure::kBadField);
      EXPECT_NE(v.status().message().find(c.expected), std::string::npos) << v.status();
    }
  }
  EXPECT_FALSE(ExtractJsonField(v1::TEXT, "{", "a", "x.json").ok());
}

TEST(SampleFieldsTest, ValuesAreCheckedAgainstTheirKind) {
  struct Case {
    v1::FieldKind kind;
    std::string bytes;
    bool ok;
    std::string expected;  // the encoding, or a part of the error
  } cases[] = {
      {v1::TEXT, "plain \xe2\x82\xac", true, "plain \xe2\x82\xac"},
      {v1::TEXT, "over\xc0\xaflong", false, "not UTF-8 (byte 4)"},
      {v1::TEXT, "surrogate \xed\xa0\x80", false, "not UTF-8 (byte 10)"},
      {v1::JSON, "{\"a\": [1, 2]}", true, "{\"a\": [1, 2]}"},
      {v1::JSON, "{\"a\": [1, 2}", false, "JSON that does not parse"},
      {v1::JSON, std::string(100000, '['), false, "JSON that does not parse"},
      {v1::CLASS, " 7\n", true, std::string("\x07\0\0\0", 4)},
      {v1::CLASS, "1,2", false, "2 class ids"},
      {v1::CLASS, "seven", false, "'seven' is not a 32-bit integer"},
      {v1::CLASSES, "1, 2 300", true, std::string("\x01\0\0\0\x02\0\0\0\x2c\x01\0\0", 12)},
      {v1::CLASSES, "", true, ""},
      {v1::CLASSES, "99999999999", false, "not a 32-bit integer"},
      {v1::BYTES, std::string("\0\xff", 2), true, std::string("\0\xff", 2)},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::string> v = EncodeFieldValue(c.kind, c.bytes, "x.y");
    ASSERT_EQ(v.ok(), c.ok) << c.kind << " " << c.bytes.substr(0, 30) << ": " << v.status();
    if (c.ok) {
      EXPECT_EQ(*v, c.expected);
    } else {
      EXPECT_EQ(DecodeFailureOf(v.status()), DecodeFailure::kBadField);
      EXPECT_NE(v.status().message().find(c.expected), std::string::npos) << v.status();
    }
  }
}

class FieldSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.Write("wds/a-000000.tar", Shard());
    CoreConfig c;
    c.data_root = dir_.path();
    c.workers = 2;
    core_ = std::make_unique<DataServiceCore>(c, &metrics_);
  }

  static v1::SessionConfig Config(const std::string& fields, v1::BadSamplePolicy policy = v1::SKIP) {
    v1::SessionConfig c;
    c.set_dataset("wds");
    c.set_batch_size(6);
    c.set_bad_sample_policy(policy);
    c.add_pipeline()->mutable_center_crop()->set_size(32);
    absl::StatusOr<std::vector<v1::FieldSpec>> parsed = ParseFieldsText(fields);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    for (const v1::FieldSpec& f : *parsed) *c.add_fields() = f;
    return c;
  }

  FinishedBatch Run(const v1::SessionConfig& config, std::vector<int64_t> indices) {
    return testing::MakeOneBatch(*core_, config, indices);
  }

  TempDir dir_;
  prometheus::Registry registry_;
  ServerMetrics metrics_{registry_};
  std::unique_ptr<DataServiceCore> core_;
};

TEST_F(FieldSessionTest, BatchCarriesEachFieldAfterTheUnchangedImageBuffer) {
  const FinishedBatch plain = Run(Config(""), {0, 1, 2, 5});
  const FinishedBatch with = Run(Config("image=jpg, caption=txt, meta=json, label=cls"), {0, 1, 2, 5});
  ASSERT_TRUE(with.status.ok()) << with.status;
  const int64_t image = with.header.total_bytes();
  EXPECT_EQ(image, plain.header.total_bytes());
  EXPECT_EQ(plain.header.field_bytes(), 0);
  EXPECT_EQ(plain.header.fields_size(), 0);
  ASSERT_EQ(static_cast<int64_t>(with.data->size()), image + with.header.field_bytes());
  // The image bytes and labels are those of a session without fields.
  EXPECT_EQ(with.data->substr(0, static_cast<size_t>(image)), *plain.data);
  EXPECT_EQ(std::vector<int32_t>(with.header.labels().begin(), with.header.labels().end()),
            std::vector<int32_t>(plain.header.labels().begin(), plain.header.labels().end()));
  const std::vector<v1::FieldSpec> fields = ValueFields(Config("image, caption=txt, meta=json, label=cls").fields());
  ASSERT_TRUE(CheckFieldLayout(with.header, fields).ok()) << CheckFieldLayout(with.header, fields);
  const absl::string_view region = absl::string_view(*with.data).substr(static_cast<size_t>(image));
  const int64_t keys[] = {0, 1, 2, 5};
  for (int i = 0; i < 4; ++i) {
    const std::string key = "s" + std::to_string(keys[i]);
    EXPECT_EQ(FieldValue(with.header.fields(0), region, i), "caption of " + key + " \xc3\xa9");
    EXPECT_EQ(FieldValue(with.header.fields(1), region, i), "{\"i\": " + std::to_string(keys[i]) + "}");
    const int32_t label = static_cast<int32_t>(keys[i] % 3);
    EXPECT_EQ(FieldValue(with.header.fields(2), region, i), std::string(reinterpret_cast<const char*>(&label), 4));
  }
}

TEST_F(FieldSessionTest, ASampleWithoutItsFieldIsReplacedWithTheReplacementsFields) {
  const FinishedBatch batch = Run(Config("image, caption=txt"), {3, 4, 0});
  ASSERT_TRUE(batch.status.ok()) << batch.status;
  ASSERT_EQ(batch.header.failed_samples_size(), 2);
  std::map<int64_t, v1::FailedSample> failed;
  for (const auto& f : batch.header.failed_samples()) failed[f.sample_index()] = f;
  EXPECT_EQ(failed[3].reason().rfind("missing_field: ", 0), 0u) << failed[3].reason();
  EXPECT_NE(failed[3].reason().find("has no member txt"), std::string::npos) << failed[3].reason();
  EXPECT_EQ(failed[4].reason().rfind("bad_field: ", 0), 0u) << failed[4].reason();
  const absl::string_view region =
      absl::string_view(*batch.data).substr(static_cast<size_t>(batch.header.total_bytes()));
  for (int slot = 0; slot < 2; ++slot) {
    const int64_t by = failed[slot == 0 ? 3 : 4].replaced_by();
    ASSERT_GE(by, 0);
    EXPECT_EQ(FieldValue(batch.header.fields(0), region, slot), "caption of s" + std::to_string(by) + " \xc3\xa9");
  }
  // Counted by reason (replacement tries that fail count too).
  EXPECT_GE(metrics_.SamplesFailed("missing_field").Value(), 1);
  EXPECT_GE(metrics_.SamplesFailed("bad_field").Value(), 1);
}

TEST_F(FieldSessionTest, FailPolicyEndsWithDataLossNamingTheMember) {
  const FinishedBatch batch = Run(Config("image, caption=txt", v1::FAIL), {0, 3});
  EXPECT_TRUE(absl::IsDataLoss(batch.status)) << batch.status;
  EXPECT_NE(batch.status.message().find("a-000000.tar:s3 has no member txt"), std::string::npos) << batch.status;
}

TEST_F(FieldSessionTest, ACaptionOverTheSessionsLimitIsTooLarge) {
  v1::SessionConfig config = Config("image, caption=txt");
  config.set_max_field_bytes(10);
  const FinishedBatch batch = Run(config, {0});
  // Every caption is over the limit: no replacement either.
  EXPECT_TRUE(absl::IsDataLoss(batch.status)) << batch.status;
  ASSERT_EQ(batch.header.failed_samples_size(), 1);
  EXPECT_NE(batch.header.failed_samples(0).reason().find(
                "too_large: a-000000.tar:s0.txt holds 16 bytes; the session's max_field_bytes is 10"),
            std::string::npos)
      << batch.header.failed_samples(0).reason();
}

TEST_F(FieldSessionTest, SessionsThatCannotBeServedAreRefusedByName) {
  v1::SessionConfig cached = Config("image, caption=txt");
  cached.set_cache_mode(v1::CACHE_RAW);
  auto refused = core_->StartSession(cached);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();

  v1::SessionConfig too_big = Config("image, caption=txt");
  too_big.set_max_field_bytes(int64_t{1} << 40);
  refused = core_->StartSession(too_big);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--max-field-bytes"), std::string::npos) << refused.status();

  v1::SessionConfig synthetic = Config("image, label, caption=txt");
  synthetic.set_dataset("synthetic:32x32:8:2");
  refused = core_->StartSession(synthetic);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_NE(refused.status().message().find("field 'caption' (text) cannot be read"), std::string::npos)
      << refused.status();
  synthetic.mutable_fields()->RemoveLast();  // image and class alone: served
  const FinishedBatch batch = Run(synthetic, {0, 1, 2});
  ASSERT_TRUE(batch.status.ok()) << batch.status;
  ASSERT_EQ(batch.header.fields_size(), 1);
  const absl::string_view region =
      absl::string_view(*batch.data).substr(static_cast<size_t>(batch.header.total_bytes()));
  for (int i = 0; i < 3; ++i) {
    const int32_t label = batch.header.labels(i);
    EXPECT_EQ(FieldValue(batch.header.fields(0), region, i), std::string(reinterpret_cast<const char*>(&label), 4));
  }
}

TEST_F(FieldSessionTest, TheBatchCacheKeepsFieldsAndKeysOnThem) {
  CoreConfig c;
  c.data_root = dir_.path();
  c.workers = 2;
  c.batch_cache_bytes = 64 << 20;
  core_ = std::make_unique<DataServiceCore>(c, &metrics_);
  const FinishedBatch first = Run(Config("image, caption=txt"), {0, 1, 2});
  const FinishedBatch hit = Run(Config("image, caption=txt"), {0, 1, 2});
  const FinishedBatch other = Run(Config("image, meta=json"), {0, 1, 2});
  ASSERT_TRUE(first.status.ok() && hit.status.ok() && other.status.ok());
  EXPECT_EQ(hit.data.get(), first.data.get());  // the kept batch itself
  EXPECT_EQ(hit.header.fields(0).name(), "caption");
  EXPECT_NE(other.data.get(), first.data.get());  // other fields: another key
  EXPECT_EQ(other.header.fields(0).name(), "meta");
  EXPECT_EQ(other.data->substr(0, static_cast<size_t>(other.header.total_bytes())),
            first.data->substr(0, static_cast<size_t>(first.header.total_bytes())));
}

// A .cls that is not a number is a bad sample in (images, labels) batches,
// as an unreadable image is: replaced under SKIP (never served as class 0),
// the end of the batch under FAIL. The issue's cases: "abc", "1e3", "",
// "0x10" and 20 digits.
TEST_F(FieldSessionTest, AClassFileThatIsNotANumberIsABadSampleUnderThePolicy) {
  std::vector<std::pair<std::string, std::string>> members;
  const char* bad[] = {"abc", "1e3", "", "0x10", "99999999999999999999"};
  for (int i = 0; i < 5; ++i) {
    members.push_back({"x" + std::to_string(i) + ".jpg", Jpeg(static_cast<uint64_t>(10 + i))});
    members.push_back({"x" + std::to_string(i) + ".cls", bad[i]});
  }
  members.push_back({"y.jpg", Jpeg(20)});
  members.push_back({"y.cls", "2"});
  dir_.Write("badcls/s.tar", TarArchive(members));
  v1::SessionConfig config = Config("");
  config.set_dataset("badcls");
  const FinishedBatch batch = Run(config, {0, 1, 2, 3, 4});
  ASSERT_TRUE(batch.status.ok()) << batch.status;
  ASSERT_EQ(batch.header.failed_samples_size(), 5);
  for (const v1::FailedSample& f : batch.header.failed_samples()) {
    EXPECT_EQ(f.reason().rfind("bad_field: s.tar:x" + std::to_string(f.sample_index()) + ".cls holds '", 0), 0u)
        << f.reason();
    EXPECT_EQ(f.replaced_by(), 5);  // the one sample with a label
  }
  for (int32_t label : batch.header.labels()) EXPECT_EQ(label, 2);
  EXPECT_GE(metrics_.SamplesFailed("bad_field").Value(), 5);

  config.set_bad_sample_policy(v1::FAIL);
  const FinishedBatch failed = Run(config, {5, 0});
  EXPECT_TRUE(absl::IsDataLoss(failed.status)) << failed.status;
  EXPECT_NE(failed.status.message().find("s.tar:x0.cls holds 'abc', not an integer class label"), std::string::npos)
      << failed.status;
}

// Field values count against the in-flight budget as they are read (the
// stream took the image bytes): a batch whose fields do not fit fails with
// RESOURCE_EXHAUSTED naming the flag, and what a made batch holds stays
// taken until its buffer goes.
TEST_F(FieldSessionTest, FieldBytesAreTakenFromTheBudgetUntilTheBatchsBufferGoes) {
  std::vector<std::pair<std::string, std::string>> members;
  for (int i = 0; i < 6; ++i) {
    members.push_back({"b" + std::to_string(i) + ".jpg", Jpeg(static_cast<uint64_t>(i))});
    members.push_back({"b" + std::to_string(i) + ".bin", std::string(100000, static_cast<char>('a' + i))});
  }
  dir_.Write("bigfields/s.tar", TarArchive(members));
  CoreConfig c;
  c.data_root = dir_.path();
  c.workers = 2;
  c.max_inflight_bytes = 1 << 20;
  core_ = std::make_unique<DataServiceCore>(c, &metrics_);
  v1::SessionConfig config = Config("image, blob=bytes:bin");
  config.set_dataset("bigfields");
  {
    const FinishedBatch batch = Run(config, {0, 1, 2, 3, 4, 5});
    ASSERT_TRUE(batch.status.ok()) << batch.status;
    EXPECT_EQ(batch.header.field_bytes(), 600000);
    EXPECT_EQ(core_->budget().used(), 600000);  // held with the batch
  }
  EXPECT_EQ(core_->budget().used(), 0);  // released with its buffer
  // Six samples of 100 KB each against 250 KB of budget.
  c.max_inflight_bytes = 250000;
  core_ = std::make_unique<DataServiceCore>(c, &metrics_);
  {
    const FinishedBatch refused = Run(config, {0, 1, 2, 3, 4, 5});
    EXPECT_TRUE(absl::IsResourceExhausted(refused.status)) << refused.status;
    EXPECT_NE(refused.status.message().find("its fields need 100000 more bytes and the server's budget for batches in "
                                            "flight (250000 bytes, --max-inflight-bytes) is used up"),
              std::string::npos)
        << refused.status;
  }
  EXPECT_EQ(core_->budget().used(), 0);  // nothing kept once the failed batch is gone
}

}  // namespace
}  // namespace stoker
