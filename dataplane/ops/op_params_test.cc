// The parameters every entry declares (OpParam) are what CheckOp enforces:
// each names a numeric field of its op's message, its default is filled in,
// and the op is accepted at each end of the declared range and refused just
// beyond it, with a message naming the field and the range. This replaces
// probing the ranges the reference page states (the page now prints the
// declarations themselves).
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/ops/op_registry.h"
#include "gtest/gtest.h"

namespace stoker {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

std::string OpName(v1::Op::OpCase which) { return v1::Op::descriptor()->FindFieldByNumber(which)->name(); }

Message& Body(v1::Op& op) {
  return *op.GetReflection()->MutableMessage(&op, v1::Op::descriptor()->FindFieldByNumber(op.op_case()));
}

// Sets a declared field to `v` (a repeated field to the one value `v`).
void Set(v1::Op& op, const char* field, double v) {
  Message& m = Body(op);
  const FieldDescriptor* f = m.GetDescriptor()->FindFieldByName(field);
  const auto* r = m.GetReflection();
  if (f->is_repeated()) {
    r->ClearField(&m, f);
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: r->AddInt32(&m, f, static_cast<int32_t>(v)); break;
      case FieldDescriptor::CPPTYPE_FLOAT: r->AddFloat(&m, f, static_cast<float>(v)); break;
      default: ADD_FAILURE() << field << ": a repeated type this test does not set";
    }
    return;
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(&m, f, static_cast<int32_t>(v)); break;
    case FieldDescriptor::CPPTYPE_FLOAT: r->SetFloat(&m, f, static_cast<float>(v)); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(&m, f, v != 0); break;
    default: ADD_FAILURE() << field << ": a type this test does not set";
  }
}

FieldDescriptor::CppType Kind(v1::Op::OpCase which, const char* field) {
  const google::protobuf::Descriptor* d = v1::Op::descriptor()->FindFieldByNumber(which)->message_type();
  return d->FindFieldByName(field)->cpp_type();
}

v1::Op Empty(v1::Op::OpCase which) {
  v1::Op op;
  op.GetReflection()->MutableMessage(&op, v1::Op::descriptor()->FindFieldByNumber(which));
  return op;
}

absl::Status Check(const OpEntry& e, v1::Op op) {
  OpShape shape;
  return CheckOp(e, "op", op, &shape);
}

std::vector<const OpEntry*> Declaring() {
  std::vector<const OpEntry*> out;
  const google::protobuf::OneofDescriptor* oneof = v1::Op::descriptor()->FindOneofByName("op");
  for (int i = 0; i < oneof->field_count(); ++i) {
    const OpEntry* e = FindOp(static_cast<v1::Op::OpCase>(oneof->field(i)->number()));
    if (e != nullptr && !e->params.empty()) out.push_back(e);
  }
  return out;
}

TEST(OpParamsTest, EveryDeclarationNamesANumericFieldOfItsMessageWithARange) {
  const std::vector<const OpEntry*> entries = Declaring();
  EXPECT_GE(entries.size(), 30u) << "most ops declare their parameters";
  for (const OpEntry* e : entries) {
    const google::protobuf::Descriptor* d = v1::Op::descriptor()->FindFieldByNumber(e->op)->message_type();
    std::set<std::string> seen;
    for (const OpParam& p : e->params) {
      const FieldDescriptor* f = d->FindFieldByName(p.field);
      ASSERT_NE(f, nullptr) << OpName(e->op) << " declares " << p.field << ", not a field of its message";
      EXPECT_TRUE(f->cpp_type() != FieldDescriptor::CPPTYPE_STRING && f->cpp_type() != FieldDescriptor::CPPTYPE_ENUM &&
                  f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE)
          << OpName(e->op) << "." << p.field;
      EXPECT_LE(p.lo, p.hi) << OpName(e->op) << "." << p.field;
      EXPECT_TRUE(seen.insert(p.field).second) << OpName(e->op) << " declares " << p.field << " twice";
    }
    // A bad declaration is an internal error, never an accepted op.
    EXPECT_NE(Check(*e, Empty(e->op)).code(), absl::StatusCode::kInternal) << OpName(e->op);
  }
}

// The op with every declared parameter at one end of its range (`end` 0:
// none set, 1: the lower ends, 2: the upper), rand_augment's magnitude in
// its bins.
v1::Op AtEnds(const OpEntry& e, int end) {
  v1::Op op = Empty(e.op);
  for (const OpParam& p : e.params) {
    if (end > 0) Set(op, p.field, end == 1 ? p.lo : p.hi);
  }
  if (e.op == v1::Op::kRandAugment && end == 1) Set(op, "magnitude", 0);
  return op;
}

// A form of the op its check accepts, preferring the one with the
// parameters at `end`: the pairs (min, max) fit each other there.
std::optional<v1::Op> AcceptedForm(const OpEntry& e, int end) {
  for (int form : {end, 0, 1, 2}) {
    if (Check(e, AtEnds(e, form)).ok()) return AtEnds(e, form);
  }
  return std::nullopt;
}

TEST(OpParamsTest, EachOpIsAcceptedAtBothEndsOfEachDeclaredRangeAndRefusedBeyond) {
  std::set<std::string> unprobed;
  int probes = 0;
  for (const OpEntry* e : Declaring()) {
    const std::optional<v1::Op> low = AcceptedForm(*e, 1), high = AcceptedForm(*e, 2);
    if (!low || !high) {
      unprobed.insert(OpName(e->op));
      continue;
    }
    for (const OpParam& p : e->params) {
      const FieldDescriptor::CppType kind = Kind(e->op, p.field);
      const bool integer = kind != FieldDescriptor::CPPTYPE_FLOAT && kind != FieldDescriptor::CPPTYPE_DOUBLE;
      const double step = integer ? 1 : std::max({1e-3 * (p.hi - p.lo), 1e-3 * std::fabs(p.hi), 1e-4});
      const std::string at = "op." + OpName(e->op) + "." + p.field;
      for (double v : {p.lo, p.hi}) {
        if (v == p.lo && p.above_lo) continue;  // refused below
        v1::Op op = v == p.lo ? *low : *high;
        Set(op, p.field, v);
        const absl::Status s = Check(*e, op);
        EXPECT_TRUE(s.ok()) << at << " = " << v << " is in the declared range " << ParamRange(p) << ": " << s;
        ++probes;
      }
      if (kind == FieldDescriptor::CPPTYPE_BOOL) continue;  // no value beyond 0..1
      for (double v : {p.above_lo ? p.lo : p.lo - step, p.hi + step}) {
        if (v == p.fallback || (v == 0 && !std::isnan(p.fallback))) continue;  // the default, or 0 for it
        v1::Op op = *low;
        Set(op, p.field, v);
        const absl::Status s = Check(*e, op);
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << at << " = " << v << " is outside " << ParamRange(p);
        // The op's own message may name a pair (scale = lo:hi) rather than the field.
        EXPECT_NE(s.message().find("op." + OpName(e->op)), std::string::npos) << s;
        ++probes;
      }
    }
  }
  EXPECT_GE(probes, 200);
  // mel_spectrogram is checked with its audio op (its bins depend on the rate): AudioPipeline, audio_ops_test.cc.
  EXPECT_EQ(unprobed, (std::set<std::string>{"mel_spectrogram"}));
}

TEST(OpParamsTest, CheckOpFillsDefaultsAndWritesTheRange) {
  const OpEntry& crop = *FindOp(v1::Op::kRandomResizedCrop);
  v1::Op op = Empty(v1::Op::kRandomResizedCrop);
  op.mutable_random_resized_crop()->set_size(224);
  OpShape shape;
  ASSERT_TRUE(CheckOp(crop, "pipeline[0]", op, &shape).ok());
  // Without presence: 0 is the default; with presence (antialias): unset is.
  EXPECT_FLOAT_EQ(op.random_resized_crop().scale_min(), 0.08f);
  EXPECT_FLOAT_EQ(op.random_resized_crop().ratio_max(), 4.0f / 3.0f);
  EXPECT_TRUE(op.random_resized_crop().has_antialias() && op.random_resized_crop().antialias());
  EXPECT_TRUE(shape.fixed && shape.height == 224);
  op.mutable_random_resized_crop()->set_antialias(false);  // a value set stays
  ASSERT_TRUE(CheckOp(crop, "pipeline[0]", op, &shape).ok());
  EXPECT_FALSE(op.random_resized_crop().antialias());

  op.mutable_random_resized_crop()->set_size(9000);
  EXPECT_EQ(CheckOp(crop, "pipeline[0]", op, &shape).message(),
            "pipeline[0].random_resized_crop.size = 9000; allowed range is 1..8192 pixels");
  v1::Op fill = Empty(v1::Op::kRotate);
  fill.mutable_rotate()->add_fill(300);
  EXPECT_NE(
      CheckOp(*FindOp(v1::Op::kRotate), "p", fill, &shape).message().find("p.rotate.fill has 300; each in 0..255"),
      std::string::npos);

  // A default outside the range is a sentinel, allowed: augmix's chain_depth -1 (random); 0 is not.
  v1::Op augmix = Empty(v1::Op::kAugmix);
  ASSERT_TRUE(CheckOp(*FindOp(v1::Op::kAugmix), "p", augmix, &shape).ok());
  EXPECT_EQ(augmix.augmix().chain_depth(), -1);
  augmix.mutable_augmix()->set_chain_depth(0);
  EXPECT_EQ(CheckOp(*FindOp(v1::Op::kAugmix), "p", augmix, &shape).message(),
            "p.augmix.chain_depth = 0; allowed range is 1..16");

  // A declaration naming no numeric field is an internal error, not an accepted op.
  OpEntry wrong = crop;
  wrong.params.push_back({"interpolation", 0, 1});
  EXPECT_EQ(CheckOp(wrong, "p", op, &shape).code(), absl::StatusCode::kInternal);
  wrong.params.back().field = "no_such_field";
  EXPECT_EQ(CheckOp(wrong, "p", op, &shape).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(CheckOp(*FindOp(v1::Op::kCenterCrop), "p", op, &shape).code(), absl::StatusCode::kInternal)
      << "another op's entry";
}

TEST(OpParamsTest, CheckOpBodyChecksAMessageHeldAlone) {
  v1::Audio audio;
  ASSERT_TRUE(CheckOpBody(v1::Op::kAudio, "pipeline[0]", audio).ok());
  EXPECT_EQ(audio.rate(), 16000);  // the declared defaults, filled in place
  EXPECT_EQ(audio.channels(), 1);
  audio.set_rate(5);
  EXPECT_EQ(CheckOpBody(v1::Op::kAudio, "pipeline[0]", audio).message(),
            "pipeline[0].audio.rate = 5; allowed range is 1000..384000 Hz");
  EXPECT_EQ(audio.rate(), 5);  // the caller's message, not a copy
  v1::VideoClip clip;
  EXPECT_EQ(CheckOpBody(v1::Op::kAudio, "p", clip).code(), absl::StatusCode::kInternal);
}

// A declared op (dataplane/ops/declared/) with every value at `end` (1: the
// lower ends, 2: the upper; 0: none given).
v1::Op DeclaredAt(const OpEntry& e, int end) {
  v1::Op op;
  op.mutable_declared()->set_name(e.name);
  for (const OpParam& p : e.params) op.mutable_declared()->add_values(end == 0 ? std::nan("") : end == 1 ? p.lo : p.hi);
  return op;
}

// The declared ops' declarations are their whole schema: each says what it
// is, its values' ranges hold at both ends and are refused beyond, and the
// defaults fill what is not given.
TEST(OpParamsTest, EachDeclaredOpIsDescribedAndCheckedByItsDeclaration) {
  ASSERT_FALSE(DeclaredOps().empty());
  int probes = 0;
  for (const OpEntry& e : DeclaredOps()) {
    ASSERT_NE(e.name, nullptr);
    EXPECT_EQ(e.op, v1::Op::kDeclared) << e.name;
    EXPECT_EQ(FindDeclaredOp(e.name), &e);
    EXPECT_EQ(v1::Op::descriptor()->FindFieldByName(e.name), nullptr) << e.name << " is also a message's op";
    EXPECT_TRUE(e.about != nullptr && *e.about != '\0') << e.name;
    EXPECT_FALSE(e.params.empty()) << e.name;
    std::set<std::string> seen;
    for (const OpParam& p : e.params) {
      EXPECT_TRUE(seen.insert(p.field).second) << e.name << " declares " << p.field << " twice";
      EXPECT_LE(p.lo, p.hi) << e.name << "." << p.field;
      EXPECT_NE(*p.help, '\0') << e.name << "." << p.field << " says nothing of itself";
    }
    v1::Op defaults = DeclaredAt(e, 0);
    ASSERT_TRUE(Check(e, defaults).ok()) << e.name << "'s defaults: " << Check(e, defaults);
    for (size_t i = 0; i < e.params.size(); ++i) {
      const OpParam& p = e.params[i];
      const std::string at = absl::StrCat("op.", e.name, ".", p.field);
      for (int end : {1, 2}) {
        v1::Op op = DeclaredAt(e, end);
        EXPECT_TRUE(Check(e, op).ok()) << at << " at " << (end == 1 ? p.lo : p.hi) << ": " << Check(e, op);
        ++probes;
      }
      const double step = std::max(1e-3 * (p.hi - p.lo), 1e-4);
      // The declaration alone refuses a value beyond its range (the entry's
      // own rules, such as lo <= hi, could refuse it first).
      OpEntry declaration_only = e;
      declaration_only.check = nullptr;
      for (double v : {p.above_lo ? p.lo : p.lo - step, p.hi + step}) {
        if (v == p.fallback) continue;
        v1::Op op = DeclaredAt(e, 0);
        op.mutable_declared()->set_values(static_cast<int>(i), v);
        EXPECT_EQ(Check(e, op).code(), absl::StatusCode::kInvalidArgument) << at << " = " << v;
        const absl::Status s = Check(declaration_only, op);
        EXPECT_NE(s.message().find(at + " = "), std::string::npos) << s;
        EXPECT_NE(s.message().find("allowed range is " + ParamRange(p)), std::string::npos) << s;
        ++probes;
      }
    }
  }
  EXPECT_GE(probes, 4 * static_cast<int>(DeclaredOps().size()));
}

}  // namespace
}  // namespace stoker
