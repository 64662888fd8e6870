#include "dataplane/ops/pipeline_text.h"
#include "dataplane/ops/op_registry.h"

#include <algorithm>
#include <limits>
#include <set>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(PipelineTextTest, DefaultTrainPipelineParses) {
  auto ops = ParsePipelineText(kDefaultTrainPipeline);
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 2u);
  EXPECT_EQ((*ops)[0].random_resized_crop().size(), 224);
  EXPECT_FLOAT_EQ((*ops)[1].random_horizontal_flip().p(), 0.5f);
}

TEST(PipelineTextTest, NamedArgumentsAndRanges) {
  auto ops =
      ParsePipelineText("random_resized_crop(size=160, scale=0.25:1, ratio=0.5:2), resize(256), center_crop(224)");
  ASSERT_TRUE(ops.ok()) << ops.status();
  ASSERT_EQ(ops->size(), 3u);
  const auto& rrc = (*ops)[0].random_resized_crop();
  EXPECT_EQ(rrc.size(), 160);
  EXPECT_FLOAT_EQ(rrc.scale_min(), 0.25f);
  EXPECT_FLOAT_EQ(rrc.ratio_max(), 2.0f);
  EXPECT_EQ((*ops)[1].resize().shorter_side(), 256);
  EXPECT_EQ((*ops)[2].center_crop().size(), 224);
}

TEST(PipelineTextTest, JitterNormalizeAndInterpolation) {
  auto ops = ParsePipelineText(
      "random_resized_crop(224, interpolation=bicubic), color_jitter(0.4, 0.4, 0.4, 0.1), "
      "normalize(mean=0.485:0.456:0.406, std=0.229:0.224:0.225)");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ((*ops)[0].random_resized_crop().interpolation(), v1::BICUBIC);
  EXPECT_FLOAT_EQ((*ops)[1].color_jitter().hue(), 0.1f);
  ASSERT_EQ((*ops)[2].normalize().std_size(), 3);
  EXPECT_FLOAT_EQ((*ops)[2].normalize().mean(1), 0.456f);
  // The text form reads any number of values; normalize's check wants 3 (CoreOpsTest).
  EXPECT_EQ(ParsePipelineText("normalize(mean=1:2)")->at(0).normalize().mean_size(), 2);
  EXPECT_FALSE(ParsePipelineText("normalize(mean=1:x:2)").ok());
  const absl::Status lanczos = ParsePipelineText("resize(256, interpolation=lanczos)").status();
  EXPECT_NE(lanczos.message().find("resize.interpolation: 'lanczos' is not one of bilinear, nearest, bicubic"),
            std::string::npos)
      << lanczos;
  auto again = ParsePipelineText(PipelineToText(*ops));
  ASSERT_TRUE(again.ok()) << PipelineToText(*ops);
  for (size_t i = 0; i < ops->size(); ++i) EXPECT_EQ((*again)[i].SerializeAsString(), (*ops)[i].SerializeAsString());
}

TEST(PipelineTextTest, OpWithoutArgumentsIsSet) {
  auto ops = ParsePipelineText("random_horizontal_flip");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_TRUE((*ops)[0].has_random_horizontal_flip());
}

TEST(PipelineTextTest, ErrorsNameTheProblem) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "empty"},
      {"blur(3)", "unknown op 'blur'"},
      {"center_crop(abc)", "center_crop.size"},
      {"center_crop(1, 2)", "at most 1"},
      {"random_resized_crop(224, scale=0.1)", "range"},
      {"center_crop(size=3, foo=1)", "no argument 'foo'"},
      {"center_crop(3", "closing"},
  };
  for (const auto& [text, fragment] : cases) {
    auto ops = ParsePipelineText(text);
    ASSERT_FALSE(ops.ok()) << text;
    EXPECT_EQ(ops.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(ops.status().message().find(fragment), std::string::npos) << text << " -> " << ops.status();
  }
}

// The unknown-op message lists every op the text form reads by name: each
// registered message op and python by its field, each declared op by its
// own name; not the carriers (declared, plugin), which no text names.
TEST(PipelineTextTest, AnUnknownOpIsToldTheOpsTheTextFormReads) {
  auto ops = ParsePipelineText("blur(3)");
  ASSERT_FALSE(ops.ok());
  const std::string message(ops.status().message());
  const size_t begin = message.find("known ops: ") + 11;
  const std::string list = message.substr(begin, message.find(" (and plugin ops") - begin) + ",";
  for (const char* named : {"center_crop", "random_resized_crop", "normalize", "python", "random_sharpness"}) {
    EXPECT_NE(list.find(std::string(named) + ","), std::string::npos) << named << " missing from: " << message;
  }
  for (const char* carrier : {" plugin,", " declared,"}) {
    EXPECT_EQ(list.find(carrier), std::string::npos) << carrier << " listed in: " << message;
  }
  for (const char* carrier : {"plugin()", "declared()", "declared(1)"}) {
    auto parsed = ParsePipelineText(carrier);
    ASSERT_FALSE(parsed.ok()) << carrier;
    EXPECT_NE(parsed.status().message().find("unknown op"), std::string::npos) << carrier << " -> " << parsed.status();
  }
}

TEST(PipelineTextTest, RoundTripsThroughText) {
  auto ops = ParsePipelineText("resize(256), center_crop(224), random_horizontal_flip(0.25)");
  ASSERT_TRUE(ops.ok());
  auto again = ParsePipelineText(PipelineToText(*ops));
  ASSERT_TRUE(again.ok()) << PipelineToText(*ops);
  ASSERT_EQ(again->size(), ops->size());
  for (size_t i = 0; i < ops->size(); ++i) EXPECT_EQ((*again)[i].SerializeAsString(), (*ops)[i].SerializeAsString());
}

TEST(PipelineTextTest, AntialiasIsOnUnlessTurnedOffAndPrintsOnlyWhenOff) {
  auto ops = ParsePipelineText(
      "resize(256, antialias=false), random_resized_crop(224, antialias=0), resize_pad(64, antialias=false), "
      "resize(128), random_resized_crop(32, antialias=true)");
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_TRUE((*ops)[0].resize().has_antialias() && !(*ops)[0].resize().antialias());
  EXPECT_TRUE((*ops)[1].random_resized_crop().has_antialias() && !(*ops)[1].random_resized_crop().antialias());
  EXPECT_FALSE((*ops)[3].resize().has_antialias());  // the server fills in true
  EXPECT_TRUE((*ops)[4].random_resized_crop().antialias());
  EXPECT_EQ(PipelineToText(*ops),
            "resize(256, antialias=false), random_resized_crop(224, antialias=false), resize_pad(64, antialias=false), "
            "resize(128), random_resized_crop(32)");
  EXPECT_FALSE(ParsePipelineText("resize(256, antialias=maybe)").ok());
}

// The first ops print as they always have: a materialised dataset's manifest
// and the raw cache's fingerprint hold this text.
TEST(PipelineTextTest, TheFirstOpsPrintAsTheyAlwaysHave) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"random_resized_crop(224)", "random_resized_crop(224)"},
      {"random_resized_crop(160, 0.35:1, interpolation=bicubic, antialias=false)",
       "random_resized_crop(160, scale=0.35:1, interpolation=bicubic, antialias=false)"},
      {"random_resized_crop(size=64, ratio=0.5:2, antialias=true)", "random_resized_crop(64, ratio=0.5:2)"},
      {"random_resized_crop(8, scale=0.123456789:1)", "random_resized_crop(8, scale=0.123457:1)"},
      {"center_crop(224)", "center_crop(224)"},
      {"center_crop()", "center_crop(0)"},
      {"resize(256, nearest)", "resize(256, interpolation=nearest)"},
      {"resize(size=256, antialias=true)", "resize(256)"},
      {"color_jitter(0.4, 0.4)", "color_jitter(0.4, 0.4, 0, 0)"},
      {"color_jitter(hue=0.1)", "color_jitter(0, 0, 0, 0.1)"},
      {"normalize(0.485:0.456:0.406, 0.229:0.224:0.225)", "normalize(mean=0.485:0.456:0.406, std=0.229:0.224:0.225)"},
      {"random_horizontal_flip(0.5)", "random_horizontal_flip(0.5)"},
      {"random_vertical_flip()", "random_vertical_flip(0)"},
      {"resize_pad(640, bicubic)", "resize_pad(640, interpolation=bicubic)"},
      {"random_iou_crop()", "random_iou_crop()"},
      {"random_iou_crop(0.3:1, 0.5:2, 0:0.5:1, 40)",
       "random_iou_crop(scale=0.3:1, aspect_ratio=0.5:2, options=0:0.5:1, trials=40)"},
  };
  for (const auto& [text, printed] : cases) {
    absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(text);
    ASSERT_TRUE(ops.ok()) << text << ": " << ops.status();
    EXPECT_EQ(PipelineToText(*ops), printed) << text;
  }
  // With the server's defaults filled in (what a manifest's prefix holds).
  v1::Op crop;
  auto* o = crop.mutable_random_resized_crop();
  o->set_size(224);
  o->set_scale_min(0.08f);
  o->set_scale_max(1);
  o->set_ratio_min(3.0f / 4.0f);
  o->set_ratio_max(4.0f / 3.0f);
  o->set_antialias(true);
  EXPECT_EQ(PipelineToText({crop}), "random_resized_crop(224, scale=0.08:1, ratio=0.75:1.33333)");
  // Values no check has seen print as they did too: -0 is unset, a NaN in a
  // list has no sign, an enum value out of range reads as the first.
  v1::Op odd;
  odd.mutable_random_resized_crop()->set_size(8);
  odd.mutable_random_resized_crop()->set_scale_min(-0.0f);
  odd.mutable_random_resized_crop()->set_interpolation(static_cast<v1::Interpolation>(7));
  EXPECT_EQ(PipelineToText({odd}), "random_resized_crop(8, interpolation=bilinear)");
  v1::Op nan;
  nan.mutable_normalize()->add_mean(-std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(PipelineToText({nan}), "normalize(mean=nan)");
  EXPECT_NE(ParsePipelineText("resize(256, nearest, true, 4)").status().message().find("takes at most 3 arguments"),
            std::string::npos);
  EXPECT_NE(ParsePipelineText("center_crop(sides=3)")
                .status()
                .message()
                .find("center_crop has no argument 'sides'; "
                      "it takes size"),
            std::string::npos);
  EXPECT_NE(ParsePipelineText("resize(big)").status().message().find("pipeline: resize.size: 'big' is not an integer"),
            std::string::npos);
  // A value that does not read is told the range its op's entry declares (OpParam).
  EXPECT_EQ(ParsePipelineText("center_crop(big)").status().message(),
            "pipeline: center_crop.size: 'big' is not an integer; allowed range is 1..8192 pixels");
  EXPECT_EQ(ParsePipelineText("solarize(threshold=dark)").status().message(),
            "pipeline: solarize.threshold: 'dark' is not a number; allowed range is 0..256");
}

TEST(PipelineTextTest, OpsReadFromTheirMessagesRoundTripAndNameTheirArguments) {
  const std::string text =
      "solarize(threshold=100, p=0.5), gaussian_blur(kernel_size=5, sigma=0.5:1.5), posterize(bits=3), "
      "random_erasing(p=1, scale=0.1:0.2, value=1:2:3), equalize(), adjust_hue(factor=-0.1), "
      "random_erasing(value_random=true)";
  auto ops = ParsePipelineText(text);
  ASSERT_TRUE(ops.ok()) << ops.status();
  EXPECT_EQ(PipelineToText(*ops), text);
  EXPECT_EQ((*ops)[0].solarize().threshold(), 100);
  EXPECT_TRUE((*ops)[4].has_equalize());
  // Positional arguments in the message's field order.
  auto positional = ParsePipelineText("gaussian_blur(7, 0.2:0.4), adjust_brightness(1.5, 0.25)");
  ASSERT_TRUE(positional.ok()) << positional.status();
  EXPECT_EQ((*positional)[0].gaussian_blur().kernel_size(), 7);
  EXPECT_FLOAT_EQ((*positional)[0].gaussian_blur().sigma_max(), 0.4f);
  EXPECT_FLOAT_EQ((*positional)[1].adjust_brightness().p(), 0.25f);
  // A float that %g would round prints with enough digits to read back.
  auto precise = ParsePipelineText("adjust_brightness(1.23456789)");
  EXPECT_EQ((*ParsePipelineText(PipelineToText(*precise)))[0].adjust_brightness().factor(),
            (*precise)[0].adjust_brightness().factor());
  const absl::Status unknown = ParsePipelineText("solarize(level=3)").status();
  EXPECT_NE(unknown.message().find("solarize has no argument 'level'; it takes threshold, p"), std::string::npos)
      << unknown;
  EXPECT_NE(ParsePipelineText("solarize(x)").status().message().find("solarize.threshold"), std::string::npos);
  EXPECT_NE(ParsePipelineText("sharpen(2)").status().message().find("adjust_sharpness"), std::string::npos);
}

// Found by the pipeline_text fuzzer: a normalize with only a mean printed
// "std=", which did not parse back.
TEST(PipelineTextTest, PartialNormalizePrintsBackToTextThatParses) {
  for (const char* text : {"normalize(0.5:0.5:0.5)", "normalize(std=0.2:0.2:0.2)", "normalize()"}) {
    auto ops = ParsePipelineText(text);
    ASSERT_TRUE(ops.ok()) << text << ": " << ops.status();
    auto again = ParsePipelineText(PipelineToText(*ops));
    ASSERT_TRUE(again.ok()) << PipelineToText(*ops) << ": " << again.status();
    EXPECT_EQ(again->at(0).SerializeAsString(), ops->at(0).SerializeAsString()) << text;
  }
}

TEST(PipelineGrammarTest, ListsEveryOpWithItsArgumentsInTheOrderTheParserReadsThem) {
  const std::vector<OpGrammar> grammar = PipelineGrammar();
  std::set<std::string> names;
  for (const OpGrammar& g : grammar) names.insert(g.name);
  // Every op of the Op message but the user ops (and `declared`, the
  // carrier of the declared ops), then every declared op by its name.
  const google::protobuf::Descriptor* op = v1::Op::descriptor();
  for (int i = 0; i < op->field_count(); ++i) {
    const std::string& name = op->field(i)->name();
    EXPECT_EQ(names.count(name), name == "python" || name == "plugin" || name == "declared" ? 0u : 1u) << name;
  }
  for (const OpEntry& e : DeclaredOps()) EXPECT_EQ(names.count(e.name), 1u) << e.name;
  auto find = [&](const std::string& name) {
    return *std::find_if(grammar.begin(), grammar.end(), [&](const OpGrammar& g) { return g.name == name; });
  };
  const OpGrammar crop = find("random_resized_crop");  // a first op: its own OpText order
  ASSERT_EQ(crop.arguments.size(), 5u);
  EXPECT_EQ(crop.arguments[1].name, "scale");
  EXPECT_EQ(crop.arguments[1].kind, "lo:hi (float)");
  EXPECT_EQ(crop.arguments[1].fields, (std::vector<std::string>{"scale_min", "scale_max"}));
  const OpGrammar solarize = find("solarize");  // read from its message: the fields' order
  ASSERT_EQ(solarize.arguments.size(), 2u);
  EXPECT_EQ(solarize.arguments[0].name, "threshold");
  EXPECT_EQ(solarize.arguments[0].kind, "float");
  // The positional order is the parser's: each argument given by position
  // lands where the same argument given by name does.
  for (const OpGrammar& g : grammar) {
    if (g.arguments.empty() || g.arguments[0].kind != "float") continue;
    auto by_position = ParsePipelineText(g.name + "(0.5)");
    auto by_name = ParsePipelineText(g.name + "(" + g.arguments[0].name + "=0.5)");
    ASSERT_TRUE(by_position.ok() && by_name.ok()) << g.name;
    EXPECT_EQ((*by_position)[0].SerializeAsString(), (*by_name)[0].SerializeAsString()) << g.name;
  }
}

}  // namespace
}  // namespace stoker
