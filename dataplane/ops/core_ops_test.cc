// The op registry covers every op a pipeline can name but the user ops, and
// the first ops' entries keep their defaults, randomness and size rules
// (pipeline_test.cc pins their pixels).
#include <set>
#include <string>

#include "dataplane/decode/image_decoder.h"
#include "dataplane/kernels/transforms.h"
#include "dataplane/ops/op_registry.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

const OpEntry& Entry(v1::Op::OpCase which) {
  const OpEntry* e = FindOp(which);
  EXPECT_NE(e, nullptr) << which;
  static const OpEntry kNone{};
  return e != nullptr ? *e : kNone;
}

// What every entry says, whether its op has a message or is declared.
void ExpectComplete(const OpEntry* e, const std::string& name) {
  EXPECT_TRUE(e->check != nullptr || !e->params.empty()) << name << " is checked by nothing";
  EXPECT_NE(e->random, nullptr) << name;
  EXPECT_TRUE(e->torchvision != nullptr && *e->torchvision != '\0') << name;
  // Only the media ops, which make their samples themselves, run no image.
  EXPECT_EQ(e->apply == nullptr, e->targets == OpTargets::kNone) << name;
}

TEST(CoreOpsTest, EveryOpButTheUserOpsHasOneEntry) {
  const google::protobuf::OneofDescriptor* oneof = v1::Op::descriptor()->FindOneofByName("op");
  ASSERT_NE(oneof, nullptr);
  std::set<std::string> missing;
  for (int i = 0; i < oneof->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = oneof->field(i);
    const auto which = static_cast<v1::Op::OpCase>(f->number());
    const OpEntry* e = FindOp(which);
    if (f->name() == "declared") {
      EXPECT_EQ(e, nullptr) << "the declared ops' carrier: each is found by its name";
      continue;
    }
    if (f->name() == "python" || f->name() == "plugin") {  // user ops: entries whose hooks check and run them
      ASSERT_NE(e, nullptr) << f->name();
      ASSERT_NE(e->user, nullptr) << f->name();
      EXPECT_TRUE(e->user->reads(f->name() == "python" ? "python" : "team.op")) << f->name();
      EXPECT_EQ(e->targets, OpTargets::kRefused) << f->name();
      EXPECT_TRUE(e->random(v1::Op())) << f->name() << ": random without the server's user ops";
      continue;
    }
    if (e != nullptr) EXPECT_EQ(e->user, nullptr) << f->name();
    if (e == nullptr) {
      missing.insert(f->name());
      continue;
    }
    EXPECT_EQ(e->op, which) << f->name();
    EXPECT_EQ(e->name, nullptr) << f->name();
    ExpectComplete(e, f->name());
  }
  for (const OpEntry& e : DeclaredOps()) ExpectComplete(&e, e.name);
  EXPECT_TRUE(missing.empty()) << "ops without an entry in the op registry: " << *missing.begin();
  EXPECT_EQ(FindOp(v1::Op::OP_NOT_SET), nullptr);
}

// An op with its own text form names its message's fields, every one of them
// (so that a field added to the message is not left out of the text).
TEST(CoreOpsTest, AnOpsOwnTextFormCoversItsMessage) {
  const google::protobuf::Descriptor* op = v1::Op::descriptor();
  int own = 0;
  for (int i = 0; i < op->field_count(); ++i) {
    const OpEntry* e = FindOp(static_cast<v1::Op::OpCase>(op->field(i)->number()));
    if (e == nullptr || e->text.arguments.empty()) continue;
    ++own;
    const google::protobuf::Descriptor* d = op->field(i)->message_type();
    std::set<std::string> named, names;
    for (const OpText::Argument& a : e->text.arguments) {
      EXPECT_NE(d->FindFieldByName(a.field), nullptr) << op->field(i)->name() << " names no field " << a.field;
      named.insert(a.field);
      if (a.max != nullptr) {
        EXPECT_NE(d->FindFieldByName(a.max), nullptr) << op->field(i)->name() << " names no field " << a.max;
        named.insert(a.max);
      }
      EXPECT_TRUE(names.insert(a.name).second) << op->field(i)->name() << " has two arguments " << a.name;
    }
    for (int f = 0; f < d->field_count(); ++f) {
      EXPECT_EQ(named.count(d->field(f)->name()), 1u)
          << op->field(i)->name() << "'s text leaves out " << d->field(f)->name();
    }
    EXPECT_LE(e->text.bare, static_cast<int>(e->text.arguments.size()));
  }
  EXPECT_EQ(own, 10);  // the nine first ops and mel_spectrogram
}

TEST(CoreOpsTest, TheRandomOpsAreTheOnesThatDraw) {
  for (auto which : {v1::Op::kRandomResizedCrop, v1::Op::kRandomHorizontalFlip, v1::Op::kRandomVerticalFlip,
                     v1::Op::kColorJitter, v1::Op::kRandomIouCrop}) {
    EXPECT_TRUE(Entry(which).random(v1::Op())) << which;
  }
  for (auto which : {v1::Op::kCenterCrop, v1::Op::kResize, v1::Op::kResizePad, v1::Op::kNormalize}) {
    EXPECT_FALSE(Entry(which).random(v1::Op())) << which;
  }
  v1::Op clip;
  clip.mutable_video_clip()->set_mode(v1::VideoClip::UNIFORM);
  EXPECT_FALSE(Entry(v1::Op::kVideoClip).random(clip));
  clip.mutable_video_clip()->set_mode(v1::VideoClip::RANDOM);
  EXPECT_TRUE(Entry(v1::Op::kVideoClip).random(clip));
}

TEST(CoreOpsTest, ChecksFillDefaultsAndSetTheSize) {
  v1::Op op;
  op.mutable_random_resized_crop()->set_size(224);
  OpShape shape;
  ASSERT_TRUE(CheckOp(Entry(v1::Op::kRandomResizedCrop), "pipeline[0]", op, &shape).ok());
  EXPECT_FLOAT_EQ(op.random_resized_crop().scale_min(), 0.08f);
  EXPECT_FLOAT_EQ(op.random_resized_crop().ratio_max(), 4.0f / 3.0f);
  EXPECT_TRUE(op.random_resized_crop().antialias());
  EXPECT_TRUE(shape.fixed);
  EXPECT_EQ(shape.height, 224);

  v1::Op resize;
  resize.mutable_resize()->set_shorter_side(256);
  ASSERT_TRUE(CheckOp(Entry(v1::Op::kResize), "pipeline[0]", resize, &shape).ok());
  EXPECT_FALSE(shape.fixed);  // the output depends on the input's aspect

  v1::Op bad;
  bad.mutable_center_crop()->set_size(0);
  const absl::Status s = CheckOp(Entry(v1::Op::kCenterCrop), "pipeline[1]", bad, &shape);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("pipeline[1].center_crop.size = 0"), std::string::npos) << s;

  v1::Op normalize;
  normalize.mutable_normalize()->add_mean(1);
  normalize.mutable_normalize()->add_mean(2);
  const absl::Status two = CheckOp(Entry(v1::Op::kNormalize), "pipeline[2]", normalize, &shape);
  EXPECT_NE(two.message().find("pipeline[2].normalize has 2 mean and 0 std values; need 3 of each"), std::string::npos)
      << two;

  v1::Op audio;
  audio.mutable_audio();
  ASSERT_TRUE(CheckOp(Entry(v1::Op::kAudio), "pipeline[0]", audio, &shape).ok());
  EXPECT_EQ(audio.audio().rate(), 16000);
}

TEST(CoreOpsTest, ResizeRefusesWhatWouldPassMaxPixels) {
  v1::Op op;
  op.mutable_resize()->set_shorter_side(1000);
  const OpEntry& e = Entry(v1::Op::kResize);
  ASSERT_NE(e.limit, nullptr);
  EXPECT_TRUE(e.limit(op, cv::Size(200, 100), 2'000'000).ok());       // 2000 x 1000
  const absl::Status s = e.limit(op, cv::Size(300, 100), 2'000'000);  // 3000 x 1000
  EXPECT_EQ(DecodeFailureOf(s), DecodeFailure::kTooLarge) << s;
  EXPECT_NE(s.message().find("resize(1000) of 300x100"), std::string::npos) << s;
  EXPECT_EQ(Entry(v1::Op::kCenterCrop).limit, nullptr);
}

TEST(CoreOpsTest, ApplyRunsTheOpAndReportsItsGeometry) {
  cv::Mat image(20, 30, CV_8UC3);
  cv::randu(image, 0, 255);
  v1::Op op;
  op.mutable_center_crop()->set_size(8);
  cv::Mat out = image.clone();
  Rng rng(1);
  GeometryLog log;
  GeometrySink geometry;
  geometry.log = &log;
  ASSERT_TRUE(geometry.Start(image.cols, image.rows).ok());
  Entry(v1::Op::kCenterCrop).apply(op, out, rng, OpContext(), &geometry);
  EXPECT_EQ(cv::norm(out, CenterCrop(image, 8), cv::NORM_INF), 0);
  ASSERT_EQ(log.steps.size(), 1u);
  EXPECT_EQ(geometry.width, 8);
}

// What the materialiser, the stored-bytes estimate, the diagnosis ladder and
// the pipeline's size rules read from the entries rather than from a list of
// ops of their own.
TEST(CoreOpsTest, EntriesSayWhatAStoredPrefixHoldsItsPixelsAndWhichFirstOpsDecodeARegion) {
  std::set<std::string> storable, region, sets_size;
  const google::protobuf::OneofDescriptor* oneof = v1::Op::descriptor()->FindOneofByName("op");
  for (int i = 0; i < oneof->field_count(); ++i) {
    const OpEntry* e = FindOp(static_cast<v1::Op::OpCase>(oneof->field(i)->number()));
    if (e == nullptr) continue;
    if (e->storable) storable.insert(oneof->field(i)->name());
    if (e->fused.region) region.insert(oneof->field(i)->name());
    if (e->sets_size) sets_size.insert(oneof->field(i)->name());
    EXPECT_EQ(e->storable, e->pixels != nullptr) << oneof->field(i)->name() << ": a storable op estimates its pixels";
    EXPECT_FALSE(e->storable && e->random(v1::Op())) << oneof->field(i)->name() << " is random";
  }
  EXPECT_EQ(storable, (std::set<std::string>{"center_crop", "resize"}));
  EXPECT_EQ(region, (std::set<std::string>{"center_crop", "random_resized_crop"}));
  EXPECT_EQ(sets_size, (std::set<std::string>{"center_crop", "random_crop", "random_resized_crop", "resize_pad"}));
  v1::Op crop, resize;
  crop.mutable_center_crop()->set_size(224);
  resize.mutable_resize()->set_shorter_side(300);
  EXPECT_EQ(Entry(v1::Op::kCenterCrop).pixels(crop, 1 << 20), 224 * 224);
  EXPECT_EQ(Entry(v1::Op::kResize).pixels(resize, 1 << 20), 300 * 400);
}

}  // namespace
}  // namespace stoker
