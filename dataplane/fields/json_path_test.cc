#include "dataplane/fields/json_path.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/fields/sample_fields.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

using json = nlohmann::json;

// What a whole-document parse finds at the path: the reference.
const json* WalkDom(const json& doc, const std::string& path) {
  const json* v = &doc;
  for (absl::string_view key : absl::StrSplit(path, '.')) {
    size_t index = 0;
    if (v->is_object() && v->contains(std::string(key))) {
      v = &(*v)[std::string(key)];
    } else if (v->is_array() && absl::SimpleAtoi(key, &index) && index < v->size()) {
      v = &(*v)[index];
    } else {
      return nullptr;
    }
  }
  return v;
}

void ExpectSameAsDom(const std::string& text, const std::string& path) {
  const json doc = json::parse(text);
  const json* want = WalkDom(doc, path);
  absl::StatusOr<json> got = FindJsonPath(text, path, "x.json");
  if (want == nullptr) {
    ASSERT_FALSE(got.ok()) << text << " @ " << path << " gave " << got->dump();
    EXPECT_EQ(DecodeFailureOf(got.status()), DecodeFailure::kBadField);
  } else {
    ASSERT_TRUE(got.ok()) << text << " @ " << path << ": " << got.status();
    EXPECT_EQ(got->dump(), want->dump()) << text << " @ " << path;
  }
}

TEST(JsonPathTest, FindsWhatAWholeParseFinds) {
  const char* docs[] = {
      R"({"a": {"b": [1, {"c": "x"}, [2, 3]]}, "d": null, "e": 1.5e300, "f": -7, "g": 18446744073709551615})",
      R"({"a": 1, "a": {"b": 2}})",                    // a key given twice: the last wins
      R"({"a": {"b": 2}, "a": 3})",                    // ... also when it ends the path
      R"({"a": {"b": 2}, "a": {"c": 3}})",             // ... and takes the path away
      R"({"z": 1, "b": 2, "a": {"y": [], "x": {}}})",  // objects print sorted, as dump() does
      R"([[0, 1], [2, [3, 4]], "s"])",
      R"("top")",
      R"({"": {"": 5}})",
  };
  const char* paths[] = {"a",     "a.b", "a.b.1", "a.b.1.c", "a.b.2.0", "a.b.7", "d",   "e",   "f", "g",
                         "1.1.0", "2",   "0",     "a.c",     "",        ".",     "a.y", "a.x", "x"};
  for (const char* doc : docs) {
    for (const char* path : paths) ExpectSameAsDom(doc, path);
  }
}

// Random trees, printed and looked up at random paths.
json RandomTree(std::mt19937& rng, int depth) {
  const int pick = static_cast<int>(rng() % (depth > 3 ? 4 : 6));
  switch (pick) {
    case 0: return json(static_cast<int>(rng() % 5));
    case 1: return json(absl::StrCat("s", rng() % 3));
    case 2: return json(nullptr);
    case 3: return json(0.25 * static_cast<double>(rng() % 9));
    case 4: {
      json a = json::array();
      for (int i = static_cast<int>(rng() % 4); i > 0; --i) a.push_back(RandomTree(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      for (int i = static_cast<int>(rng() % 4); i > 0; --i) o[absl::StrCat(rng() % 3)] = RandomTree(rng, depth + 1);
      return o;
    }
  }
}

TEST(JsonPathTest, RandomTreesAgreeWithTheDom) {
  std::mt19937 rng(7);
  for (int t = 0; t < 300; ++t) {
    const std::string text = RandomTree(rng, 0).dump();
    std::string path = absl::StrCat(rng() % 3);
    for (int k = static_cast<int>(rng() % 4); k > 0; --k) absl::StrAppend(&path, ".", rng() % 3);
    ExpectSameAsDom(text, path);
  }
}

TEST(JsonPathTest, DeepNestingIsACorruptSampleNotACrash) {
  // The issue's member: 100,000 levels, which nlohmann's recursive dump()
  // and destructor could not survive.
  const std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  for (const char* path : {"a", "b"}) {
    absl::StatusOr<json> v = FindJsonPath(deep, path, "s0.json (field 'meta')");
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(DecodeFailureOf(v.status()), DecodeFailure::kCorrupt);
    EXPECT_NE(v.status().message().find("s0.json (field 'meta'): JSON nested deeper than 256"), std::string::npos)
        << v.status();
  }
  absl::StatusOr<std::string> field = ExtractJsonField(v1::JSON, deep, "a", "s0.json");
  EXPECT_EQ(DecodeFailureOf(field.status()), DecodeFailure::kCorrupt);

  // At the limit it is read (and printed back whole).
  const std::string limit = "{\"a\":" + std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']') + "}";
  absl::StatusOr<std::string> ok = ExtractJsonField(v1::JSON, limit, "a", "s0.json");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 2u * (kMaxJsonDepth - 1));
}

TEST(JsonPathTest, OnlyTheValueAtThePathIsBuiltAndItIsBounded) {
  // 10 MB of small values beside the path: over the tree bound were they
  // built (16 bytes each at least), yet the value at the path comes back.
  std::string big = "{\"skip\": [";
  for (int i = 0; i < 5000000; ++i) absl::StrAppend(&big, i == 0 ? "" : ",", i % 10);
  absl::StrAppend(&big, "], \"keep\": {\"n\": 3}}");
  absl::StatusOr<std::string> n = ExtractJsonField(v1::CLASS, big, "keep.n", "big.json");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, std::string("\x03\0\0\0", 4));

  // The same values at the path: refused as too large, naming the bound.
  absl::StatusOr<std::string> all = ExtractJsonField(v1::JSON, big, "skip", "big.json");
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(DecodeFailureOf(all.status()), DecodeFailure::kTooLarge);
  EXPECT_NE(all.status().message().find("big.json: the JSON value at path 'skip' would take more than 64 MiB"),
            std::string::npos)
      << all.status();
}

TEST(JsonPathTest, SyntaxErrorsAnywhereAreBadFields) {
  for (const char* doc : {"{", R"({"a": 1,})", R"({"a": 1} x)", R"({"b": [1, }, "a": 1})", ""}) {
    absl::StatusOr<json> v = FindJsonPath(doc, "a", "x.json");
    ASSERT_FALSE(v.ok()) << doc;
    EXPECT_EQ(DecodeFailureOf(v.status()), DecodeFailure::kBadField);
    EXPECT_NE(v.status().message().find("x.json: JSON that does not parse"), std::string::npos) << v.status();
  }
}

}  // namespace
}  // namespace stoker
