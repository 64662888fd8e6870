#include "common/field_layout.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

std::vector<v1::FieldSpec> Specs() {
  std::vector<v1::FieldSpec> specs(2);
  specs[0].set_name("caption");
  specs[0].set_kind(v1::TEXT);
  specs[1].set_name("label");
  specs[1].set_kind(v1::CLASS);
  return specs;
}

std::string Int32(int32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); }

v1::BatchHeader Built(std::string* region) {
  v1::BatchHeader h;
  for (int i = 0; i < 3; ++i) h.add_sample_indices(i);
  std::vector<std::vector<std::string>> values = {{"a cat", Int32(7)}, {"", Int32(0)}, {"two dogs", Int32(3)}};
  region->clear();
  AppendFieldRegion(Specs(), &values, &h, region);
  return h;
}

TEST(FieldLayoutTest, RegionHoldsEachFieldsValuesInSampleOrder) {
  std::string region;
  v1::BatchHeader h = Built(&region);
  ASSERT_TRUE(CheckFieldLayout(h, Specs()).ok()) << CheckFieldLayout(h, Specs());
  EXPECT_EQ(h.field_bytes(), static_cast<int64_t>(region.size()));
  EXPECT_EQ(region.size(), 13u + 12u);
  EXPECT_EQ(FieldValue(h.fields(0), region, 0), "a cat");
  EXPECT_EQ(FieldValue(h.fields(0), region, 1), "");
  EXPECT_EQ(FieldValue(h.fields(0), region, 2), "two dogs");
  EXPECT_EQ(FieldValue(h.fields(1), region, 2), Int32(3));
  EXPECT_EQ(h.fields(1).offset(), 13);
}

TEST(FieldLayoutTest, BadLayoutsAreNamed) {
  std::string region;
  struct Case {
    const char* name;
    void (*edit)(v1::BatchHeader&);
    const char* expected;
  } cases[] = {
      {"missing field", [](v1::BatchHeader& h) { h.mutable_fields()->RemoveLast(); }, "has 1 fields"},
      {"renamed", [](v1::BatchHeader& h) { h.mutable_fields(0)->set_name("x"); }, "sent as 'x'"},
      {"past the region", [](v1::BatchHeader& h) { h.mutable_fields(1)->set_offset(20); }, "outside"},
      {"negative bytes", [](v1::BatchHeader& h) { h.set_field_bytes(-1); }, "claims -1"},
      {"decreasing", [](v1::BatchHeader& h) { h.mutable_fields(0)->set_sample_offsets(1, 9); }, "sample 1"},
      {"short offsets", [](v1::BatchHeader& h) { h.mutable_fields(0)->mutable_sample_offsets()->RemoveLast(); },
       "sample offsets"},
      {"class of 8 bytes", [](v1::BatchHeader& h) { h.mutable_fields(1)->set_sample_offsets(1, 8); }, "sample 0"},
  };
  for (const Case& c : cases) {
    v1::BatchHeader h = Built(&region);
    c.edit(h);
    absl::Status s = CheckFieldLayout(h, Specs());
    EXPECT_TRUE(absl::IsDataLoss(s)) << c.name << ": " << s;
    EXPECT_NE(s.message().find(c.expected), std::string::npos) << c.name << ": " << s;
  }
  v1::BatchHeader plain;
  EXPECT_TRUE(CheckFieldLayout(plain, {}).ok());
  plain.set_field_bytes(5);
  EXPECT_FALSE(CheckFieldLayout(plain, {}).ok());
}

}  // namespace
}  // namespace stoker
