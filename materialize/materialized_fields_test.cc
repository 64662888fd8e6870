// A materialised dataset stores its source samples' fields (WebDataset
// members: captions, json, ...) beside the stored pixels: sessions with
// fields over it get the source's values with the materialised pixels, a
// field changed in place after the run is a corrupt sample (its checksum),
// and what a materialised dataset cannot give is refused by name.
#include <fstream>

#include "common/field_layout.h"
#include "common/field_spec.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sessions/data_service_core.h"
#include "dataplane/sources/materialized_source.h"
#include "dataplane/sources/tar_shards.h"
#include "gtest/gtest.h"
#include "materialize/materializer.h"
#include "prometheus/registry.h"
#include "tests/testdata/image_set.h"
#include "tests/testdata/one_batch.h"
#include "tests/testdata/tar_writer.h"
#include "tests/testdata/temp_dir.h"

namespace stoker {
namespace {
namespace fs = std::filesystem;

// Six samples with jpg, cls, txt and json; s3 has no txt; s1 has a member
// named xxh3, which the stored dataset reserves for its own checksum.
std::string Shard() {
  std::vector<std::pair<std::string, std::string>> members;
  for (int i = 0; i < 6; ++i) {
    const std::string key = "s" + std::to_string(i);
    members.push_back(
        {key + ".jpg", testing::EncodeJpeg(testing::SyntheticImage(40, 48, static_cast<uint64_t>(i)), 90)});
    members.push_back({key + ".cls", std::to_string(i % 3)});
    if (i != 3) members.push_back({key + ".txt", "caption of " + key});
    members.push_back({key + ".json", "{\"i\": " + std::to_string(i) + "}"});
    if (i == 1) members.push_back({key + ".xxh3", "the source's own"});
  }
  return testing::TarArchive(members);
}

class MaterializedFieldsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_.Write("wds/a-000000.tar", Shard());
    MaterializeConfig c;
    c.data_root = root_.path();
    c.dataset = "wds";
    c.prefix = *ParsePipelineText("resize(32)");
    c.format = *ParseStoredFormat("raw", "none");
    c.out = root_.path() / "out";
    c.shard_samples = 4;
    absl::StatusOr<MaterializeReport> r = Materialize(c);
    ASSERT_TRUE(r.ok()) << r.status();
    report_ = *std::move(r);
  }

  static v1::SessionConfig Session(const std::string& dataset, const std::string& fields,
                                   v1::BadSamplePolicy policy = v1::SKIP) {
    v1::SessionConfig c;
    c.set_dataset(dataset);
    c.set_batch_size(4);
    c.set_bad_sample_policy(policy);
    const absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText("resize(32), center_crop(32)");
    for (const v1::Op& op : *ops) *c.add_pipeline() = op;
    const absl::StatusOr<std::vector<v1::FieldSpec>> parsed = ParseFieldsText(fields);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (parsed.ok()) {
      for (const v1::FieldSpec& f : *parsed) *c.add_fields() = f;
    }
    return c;
  }

  std::unique_ptr<DataServiceCore> Core() {
    CoreConfig c;
    c.data_root = root_.path();
    c.workers = 2;
    return std::make_unique<DataServiceCore>(c, &metrics_);
  }

  // Flips one byte of `member` (e.g. "000000001.txt") in the stored shards.
  void Flip(const std::string& member) {
    for (const Manifest::Shard& s : report_.manifest.shards) {
      const fs::path path = root_.path() / "out" / s.name;
      const absl::StatusOr<TarScan> scan = ScanTar(path);
      ASSERT_TRUE(scan.ok()) << scan.status();
      for (const TarMember& m : scan->members) {
        if (m.name != member) continue;
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        ASSERT_TRUE(f.is_open()) << path;
        f.seekp(m.offset);
        f.write("#", 1);  // "caption of s1" -> "#aption of s1"
        ASSERT_TRUE(f.good()) << path;
        return;
      }
    }
    FAIL() << "no member " << member;
  }

  testing::TempDir root_;
  MaterializeReport report_;
  prometheus::Registry registry_;
  ServerMetrics metrics_{registry_};
};

TEST_F(MaterializedFieldsTest, FieldsAreStoredBesideThePixelsAndServedAsTheSourcesAre) {
  EXPECT_TRUE(report_.manifest.stores_fields);
  EXPECT_EQ(report_.manifest.fields, (std::vector<std::string>{"json", "txt"}));
  absl::StatusOr<Manifest> on_disk = ReadManifest(root_.path() / "out");
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  EXPECT_EQ(on_disk->fields, report_.manifest.fields);

  std::unique_ptr<DataServiceCore> core = Core();
  const std::string fields = "image, caption=txt, meta=json, label=cls";
  const FinishedBatch source = testing::MakeOneBatch(*core, Session("wds", fields), {0, 1, 2, 5});
  const FinishedBatch stored = testing::MakeOneBatch(*core, Session("out", fields), {0, 1, 2, 5});
  ASSERT_TRUE(source.status.ok()) << source.status;
  ASSERT_TRUE(stored.status.ok()) << stored.status;
  EXPECT_EQ(stored.header.failed_samples_size(), 0);
  // Raw pixels: the image buffer, the field regions and the labels are the source's, byte for byte.
  EXPECT_EQ(*stored.data, *source.data);
  EXPECT_EQ(stored.header.field_bytes(), source.header.field_bytes());
  ASSERT_EQ(stored.header.fields_size(), 3);
  const absl::string_view region =
      absl::string_view(*stored.data).substr(static_cast<size_t>(stored.header.total_bytes()));
  EXPECT_EQ(FieldValue(stored.header.fields(0), region, 3), "caption of s5");
  EXPECT_EQ(FieldValue(stored.header.fields(1), region, 1), "{\"i\": 1}");

  // The sample without a caption lacks it there too.
  const FinishedBatch missing = testing::MakeOneBatch(*core, Session("out", "image, caption=txt", v1::FAIL), {3});
  EXPECT_TRUE(absl::IsDataLoss(missing.status)) << missing.status;
  EXPECT_NE(missing.status.message().find("has no member txt"), std::string::npos) << missing.status;
}

TEST_F(MaterializedFieldsTest, TheDatasetsOwnMemberNamesAreNotTakenFromTheSource) {
  absl::StatusOr<std::shared_ptr<const MaterializedSource>> m = MaterializedSource::Open(root_.path() / "out");
  ASSERT_TRUE(m.ok()) << m.status();
  // s1's source member .xxh3 was left out: the stored one is the checksum of the stored pixels.
  EXPECT_EQ(*(*m)->ReadField(1, {"xxh3"}, nullptr), StoredChecksum(*(*m)->Read(1)));
  EXPECT_EQ((*m)->FieldMembers(1), std::vector<std::string>{});  // a materialised dataset is not materialised again
}

TEST_F(MaterializedFieldsTest, AFieldChangedAfterTheRunIsACorruptSampleAndTheImageStillServes) {
  Flip("000000001.txt");
  std::unique_ptr<DataServiceCore> core = Core();
  const FinishedBatch batch = testing::MakeOneBatch(*core, Session("out", "image, caption=txt", v1::FAIL), {0, 1});
  EXPECT_TRUE(absl::IsDataLoss(batch.status)) << batch.status;
  EXPECT_NE(batch.status.message().find("shard-000000.tar:000000001.txt has checksum"), std::string::npos)
      << batch.status;
  EXPECT_GE(metrics_.SamplesFailed("corrupt").Value(), 1);
  // The other field of that sample and its pixels are intact, and served.
  const FinishedBatch meta = testing::MakeOneBatch(*core, Session("out", "image, meta=json", v1::FAIL), {0, 1});
  EXPECT_TRUE(meta.status.ok()) << meta.status;
  const FinishedBatch plain = testing::MakeOneBatch(*core, Session("out", "", v1::FAIL), {0, 1});
  EXPECT_TRUE(plain.status.ok()) << plain.status;
}

TEST_F(MaterializedFieldsTest, WhatAMaterialisedDatasetCannotGiveIsRefusedByName) {
  std::unique_ptr<DataServiceCore> core = Core();
  auto mask = core->StartSession(Session("out", "image, seg=mask:seg.png"));
  EXPECT_TRUE(absl::IsFailedPrecondition(mask.status())) << mask.status();
  EXPECT_NE(mask.status().message().find("field 'seg' (mask)"), std::string::npos) << mask.status();

  // A dataset made before fields were stored: its manifest lists none.
  fs::copy(root_.path() / "out", root_.path() / "old");
  Manifest old = report_.manifest;
  old.stores_fields = false;
  old.fields.clear();
  root_.Write("old/manifest.json", old.ToJson());
  std::unique_ptr<DataServiceCore> again = Core();
  auto refused = again->StartSession(Session("old", "image, caption=txt"));
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("materialised before"), std::string::npos) << refused.status();
  // Its images and tree labels still serve.
  const FinishedBatch plain = testing::MakeOneBatch(*again, Session("old", "image, label"), {0, 1});
  EXPECT_TRUE(plain.status.ok()) << plain.status;
}

}  // namespace
}  // namespace stoker
