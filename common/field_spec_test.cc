#include "common/field_spec.h"

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(FieldSpecTest, KindsFollowFromExtensionsAndNames) {
  auto fields =
      ParseFieldsText("image=jpg;png;.WEBP, caption=txt, meta=json, label=cls, raw=bytes:json, tags=classes:tags");
  ASSERT_TRUE(fields.ok()) << fields.status();
  ASSERT_EQ(fields->size(), 6u);
  EXPECT_EQ((*fields)[0].kind(), v1::IMAGE);
  EXPECT_EQ((*fields)[0].extensions_size(), 3);
  EXPECT_EQ((*fields)[0].extensions(2), "webp");
  EXPECT_EQ((*fields)[1].kind(), v1::TEXT);
  EXPECT_EQ((*fields)[2].kind(), v1::JSON);
  EXPECT_EQ((*fields)[3].kind(), v1::CLASS);
  EXPECT_EQ((*fields)[4].kind(), v1::BYTES);
  EXPECT_EQ((*fields)[4].extensions(0), "json");
  EXPECT_EQ((*fields)[5].kind(), v1::CLASSES);

  auto bare = ParseFieldsText("image, label, caption, meta, npy");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ((*bare)[0].kind(), v1::IMAGE);
  EXPECT_TRUE((*bare)[0].extensions().empty());
  EXPECT_EQ((*bare)[1].kind(), v1::CLASS);
  EXPECT_EQ((*bare)[2].kind(), v1::TEXT);
  EXPECT_EQ((*bare)[2].extensions(0), "txt");
  EXPECT_EQ((*bare)[3].kind(), v1::JSON);
  EXPECT_EQ((*bare)[4].kind(), v1::BYTES);
  EXPECT_EQ((*bare)[4].extensions(0), "npy");
  auto png = ParseFieldsText("png, label");
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ((*png)[0].kind(), v1::IMAGE);
  ASSERT_EQ((*png)[0].extensions_size(), 1);  // a bare image extension names its member
  EXPECT_EQ((*png)[0].extensions(0), "png");
}

TEST(FieldSpecTest, VideoAndAudioNameTheSampleOfAMediaSessionOrAVideosTrack) {
  auto video = ParseFieldsText("video, audio, caption");
  ASSERT_TRUE(video.ok()) << video.status();
  EXPECT_EQ((*video)[0].kind(), v1::IMAGE);  // the sample: its clips
  EXPECT_TRUE((*video)[0].extensions().empty());
  EXPECT_EQ((*video)[1].kind(), v1::AUDIO_TRACK);  // the video's audio track
  auto audio = ParseFieldsText("audio=flac;wav, label, raw=mp4", /*audio_sample=*/true);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_EQ((*audio)[0].kind(), v1::IMAGE);  // an audio(...) pipeline's sample, from those members
  EXPECT_EQ((*audio)[0].extensions(1), "wav");
  EXPECT_EQ((*audio)[2].kind(), v1::BYTES);  // another name: the member's bytes, as before
  // Without an audio pipeline, "audio" is no sample: an image field is still needed.
  EXPECT_FALSE(ParseFieldsText("audio, label").ok());
  EXPECT_TRUE(ParseFieldsText("audio, label", true).ok());
  auto bytes = ParseFieldsText("image, audio=bytes:flac");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ((*bytes)[1].kind(), v1::BYTES);
  // The text form round-trips the kind.
  v1::SessionConfig c;
  for (const auto& f : *video) *c.add_fields() = f;
  EXPECT_EQ(FieldsToText(c.fields()), "video=image, audio=audio, caption=text:txt");
}

TEST(FieldSpecTest, JsonPathsTypeOneValueOfAMember) {
  auto fields = ParseFieldsText("image, score=number:json@aesthetic.score, tag=json@tags.0, ids=classes:json@labels");
  ASSERT_TRUE(fields.ok()) << fields.status();
  EXPECT_EQ((*fields)[1].kind(), v1::NUMBER);
  EXPECT_EQ((*fields)[1].extensions(0), "json");
  EXPECT_EQ((*fields)[1].json_path(), "aesthetic.score");
  EXPECT_EQ((*fields)[2].kind(), v1::TEXT);  // a path without a kind: a string
  EXPECT_EQ((*fields)[3].kind(), v1::CLASSES);
  google::protobuf::RepeatedPtrField<v1::FieldSpec> repeated(fields->begin(), fields->end());
  auto again = ParseFieldsText(FieldsToText(repeated));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[1].json_path(), "aesthetic.score");
  for (const char* bad :
       {"image, s=number:json", "image, s=number:json@a..b", "image, s=boxes:json@a", "image, s=number:json@a b"}) {
    EXPECT_FALSE(ParseFieldsText(bad).ok()) << bad;
  }
}

TEST(FieldSpecTest, TextRoundTrips) {
  auto fields = ParseFieldsText("image=jpg;png, caption=txt, label=class");
  ASSERT_TRUE(fields.ok());
  google::protobuf::RepeatedPtrField<v1::FieldSpec> repeated(fields->begin(), fields->end());
  const std::string text = FieldsToText(repeated);
  EXPECT_EQ(text, "image=image:jpg;png, caption=text:txt, label=class");
  auto again = ParseFieldsText(text);
  ASSERT_TRUE(again.ok()) << again.status();
  google::protobuf::RepeatedPtrField<v1::FieldSpec> repeated_again(again->begin(), again->end());
  EXPECT_EQ(FieldsToText(repeated_again), text);
  EXPECT_TRUE(ParseFieldsText("  ")->empty());
}

TEST(FieldSpecTest, BadTextIsNamed) {
  struct Case {
    const char* text;
    const char* expected;
  } cases[] = {
      {"caption=txt", "exactly one field must be of kind image"},
      {"image, image2=png", "2 image fields"},
      {"image, caption=txt, caption=json", "'caption' appears twice"},
      {"image, =txt", "has no name"},
      {"image, c=wat:txt", "unknown kind 'wat'"},
      {"image, c d=txt", "name 'c d'"},
      {"image, c=txt;BA D", "extension 'ba d'"},
      // One leading dot is dropped ("c=.txt"); more would not print back the same (found by the fuzzer).
      {"image, caption=...n....", "extension '..n....'"},
  };
  for (const Case& c : cases) {
    auto fields = ParseFieldsText(c.text);
    ASSERT_FALSE(fields.ok()) << c.text;
    EXPECT_EQ(fields.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(fields.status().message().find(c.expected), std::string::npos) << c.text << ": " << fields.status();
  }
}

TEST(FieldSpecTest, CheckFieldsBoundsCountKindAndBytes) {
  v1::SessionConfig config;
  auto* image = config.add_fields();
  image->set_name("image");
  image->set_kind(v1::IMAGE);
  EXPECT_TRUE(CheckFields(config, 1 << 20).ok());
  config.set_max_field_bytes(2 << 20);
  EXPECT_NE(CheckFields(config, 1 << 20).message().find("--max-field-bytes"), std::string::npos);
  config.set_max_field_bytes(0);
  auto* unknown = config.add_fields();
  unknown->set_name("x");
  unknown->set_kind(static_cast<v1::FieldKind>(99));
  EXPECT_NE(CheckFields(config, 0).message().find("has no kind"), std::string::npos);
  config.mutable_fields()->RemoveLast();
  for (int i = 0; i < kMaxFields; ++i) {
    auto* f = config.add_fields();
    f->set_name("f" + std::to_string(i));
    f->set_kind(v1::TEXT);
  }
  EXPECT_NE(CheckFields(config, 0).message().find("at most 32"), std::string::npos);
}

}  // namespace
}  // namespace stoker
