#include "dataplane/ops/policy_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "dataplane/kernels/transforms.h"
#include "dataplane/ops/erasing_ops.h"
#include "dataplane/ops/geometric_ops.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/photometric_ops.h"

namespace stoker {
namespace {

using P = PolicyOp;

// 8 - round(i / ((bins - 1) / span)) (or from `top`): the posterize bits of bin i.
float PosterizeBits(int top, float span, int bins, int i) {
  const float q = static_cast<float>(i) / (static_cast<float>(bins - 1) / span);
  return static_cast<float>(top - static_cast<int>(std::nearbyint(q)));
}

// One op of an augmentation space: its magnitude for bin i, whether it has
// magnitudes at all, and whether a sign is drawn.
struct SpaceOp {
  P op;
  bool has_bins;
  bool signed_;
};

// The spaces' op orders (torchvision's dict orders; the index drawn picks one).
const std::vector<SpaceOp> kAutoAugmentSpace = {
    {P::kShearX, true, true},     {P::kShearY, true, true},    {P::kTranslateX, true, true},
    {P::kTranslateY, true, true}, {P::kRotate, true, true},    {P::kBrightness, true, true},
    {P::kColor, true, true},      {P::kContrast, true, true},  {P::kSharpness, true, true},
    {P::kPosterize, true, false}, {P::kSolarize, true, false}, {P::kAutoContrast, false, false},
    {P::kEqualize, false, false}, {P::kInvert, false, false}};
const std::vector<SpaceOp> kRandAugmentSpace = {
    {P::kIdentity, false, false},     {P::kShearX, true, true},     {P::kShearY, true, true},
    {P::kTranslateX, true, true},     {P::kTranslateY, true, true}, {P::kRotate, true, true},
    {P::kBrightness, true, true},     {P::kColor, true, true},      {P::kContrast, true, true},
    {P::kSharpness, true, true},      {P::kPosterize, true, false}, {P::kSolarize, true, false},
    {P::kAutoContrast, false, false}, {P::kEqualize, false, false}};

enum class Space { kAutoAugment, kRandAugment, kTrivialWide, kAugMix };

float Magnitude(Space space, P op, int bins, int i, int height, int width) {
  const bool wide = space == Space::kTrivialWide;
  switch (op) {
    case P::kShearX:
    case P::kShearY: return TorchLinspace(0, wide ? 0.99f : 0.3f, bins, i);
    case P::kTranslateX:
      return TorchLinspace(0, wide ? 32.0f : space == Space::kAugMix ? width / 3.0f : 150.0f / 331.0f * width, bins, i);
    case P::kTranslateY:
      return TorchLinspace(0,
                           wide                      ? 32.0f
                           : space == Space::kAugMix ? height / 3.0f
                                                     : 150.0f / 331.0f * height,
                           bins, i);
    case P::kRotate: return TorchLinspace(0, wide ? 135.0f : 30.0f, bins, i);
    case P::kBrightness:
    case P::kColor:
    case P::kContrast:
    case P::kSharpness: return TorchLinspace(0, wide ? 0.99f : 0.9f, bins, i);
    case P::kPosterize:
      return space == Space::kAugMix ? PosterizeBits(4, 4, bins, i) : PosterizeBits(8, wide ? 6 : 4, bins, i);
    case P::kSolarize: return TorchLinspace(255, 0, bins, i);
    default: return 0;
  }
}

struct SubPolicy {
  P op;
  float p;
  int bin;  // -1: the op has no magnitude
};
using Policy = std::vector<std::pair<SubPolicy, SubPolicy>>;

// The AutoAugment paper's sub-policies (Cubuk et al. 2019, appendix), in
// torchvision's order.
const Policy& PolicyTable(v1::AutoAugmentPolicy which) {
  static const Policy imagenet = {
      {{P::kPosterize, 0.4f, 8}, {P::kRotate, 0.6f, 9}},    {{P::kSolarize, 0.6f, 5}, {P::kAutoContrast, 0.6f, -1}},
      {{P::kEqualize, 0.8f, -1}, {P::kEqualize, 0.6f, -1}}, {{P::kPosterize, 0.6f, 7}, {P::kPosterize, 0.6f, 6}},
      {{P::kEqualize, 0.4f, -1}, {P::kSolarize, 0.2f, 4}},  {{P::kEqualize, 0.4f, -1}, {P::kRotate, 0.8f, 8}},
      {{P::kSolarize, 0.6f, 3}, {P::kEqualize, 0.6f, -1}},  {{P::kPosterize, 0.8f, 5}, {P::kEqualize, 1.0f, -1}},
      {{P::kRotate, 0.2f, 3}, {P::kSolarize, 0.6f, 8}},     {{P::kEqualize, 0.6f, -1}, {P::kPosterize, 0.4f, 6}},
      {{P::kRotate, 0.8f, 8}, {P::kColor, 0.4f, 0}},        {{P::kRotate, 0.4f, 9}, {P::kEqualize, 0.6f, -1}},
      {{P::kEqualize, 0.0f, -1}, {P::kEqualize, 0.8f, -1}}, {{P::kInvert, 0.6f, -1}, {P::kEqualize, 1.0f, -1}},
      {{P::kColor, 0.6f, 4}, {P::kContrast, 1.0f, 8}},      {{P::kRotate, 0.8f, 8}, {P::kColor, 1.0f, 2}},
      {{P::kColor, 0.8f, 8}, {P::kSolarize, 0.8f, 7}},      {{P::kSharpness, 0.4f, 7}, {P::kInvert, 0.6f, -1}},
      {{P::kShearX, 0.6f, 5}, {P::kEqualize, 1.0f, -1}},    {{P::kColor, 0.4f, 0}, {P::kEqualize, 0.6f, -1}},
      {{P::kEqualize, 0.4f, -1}, {P::kSolarize, 0.2f, 4}},  {{P::kSolarize, 0.6f, 5}, {P::kAutoContrast, 0.6f, -1}},
      {{P::kInvert, 0.6f, -1}, {P::kEqualize, 1.0f, -1}},   {{P::kColor, 0.6f, 4}, {P::kContrast, 1.0f, 8}},
      {{P::kEqualize, 0.8f, -1}, {P::kEqualize, 0.6f, -1}}};
  static const Policy cifar10 = {{{P::kInvert, 0.1f, -1}, {P::kContrast, 0.2f, 6}},
                                 {{P::kRotate, 0.7f, 2}, {P::kTranslateX, 0.3f, 9}},
                                 {{P::kSharpness, 0.8f, 1}, {P::kSharpness, 0.9f, 3}},
                                 {{P::kShearY, 0.5f, 8}, {P::kTranslateY, 0.7f, 9}},
                                 {{P::kAutoContrast, 0.5f, -1}, {P::kEqualize, 0.9f, -1}},
                                 {{P::kShearY, 0.2f, 7}, {P::kPosterize, 0.3f, 7}},
                                 {{P::kColor, 0.4f, 3}, {P::kBrightness, 0.6f, 7}},
                                 {{P::kSharpness, 0.3f, 9}, {P::kBrightness, 0.7f, 9}},
                                 {{P::kEqualize, 0.6f, -1}, {P::kEqualize, 0.5f, -1}},
                                 {{P::kContrast, 0.6f, 7}, {P::kSharpness, 0.6f, 5}},
                                 {{P::kColor, 0.7f, 7}, {P::kTranslateX, 0.5f, 8}},
                                 {{P::kEqualize, 0.3f, -1}, {P::kAutoContrast, 0.4f, -1}},
                                 {{P::kTranslateY, 0.4f, 3}, {P::kSharpness, 0.2f, 6}},
                                 {{P::kBrightness, 0.9f, 6}, {P::kColor, 0.2f, 8}},
                                 {{P::kSolarize, 0.5f, 2}, {P::kInvert, 0.0f, -1}},
                                 {{P::kEqualize, 0.2f, -1}, {P::kAutoContrast, 0.6f, -1}},
                                 {{P::kEqualize, 0.2f, -1}, {P::kEqualize, 0.6f, -1}},
                                 {{P::kColor, 0.9f, 9}, {P::kEqualize, 0.6f, -1}},
                                 {{P::kAutoContrast, 0.8f, -1}, {P::kSolarize, 0.2f, 8}},
                                 {{P::kBrightness, 0.1f, 3}, {P::kColor, 0.7f, 0}},
                                 {{P::kSolarize, 0.4f, 5}, {P::kAutoContrast, 0.9f, -1}},
                                 {{P::kTranslateY, 0.9f, 9}, {P::kTranslateY, 0.7f, 9}},
                                 {{P::kAutoContrast, 0.9f, -1}, {P::kSolarize, 0.8f, 3}},
                                 {{P::kEqualize, 0.8f, -1}, {P::kInvert, 0.1f, -1}},
                                 {{P::kTranslateY, 0.7f, 9}, {P::kAutoContrast, 0.9f, -1}}};
  static const Policy svhn = {
      {{P::kShearX, 0.9f, 4}, {P::kInvert, 0.2f, -1}},        {{P::kShearY, 0.9f, 8}, {P::kInvert, 0.7f, -1}},
      {{P::kEqualize, 0.6f, -1}, {P::kSolarize, 0.6f, 6}},    {{P::kInvert, 0.9f, -1}, {P::kEqualize, 0.6f, -1}},
      {{P::kEqualize, 0.6f, -1}, {P::kRotate, 0.9f, 3}},      {{P::kShearX, 0.9f, 4}, {P::kAutoContrast, 0.8f, -1}},
      {{P::kShearY, 0.9f, 8}, {P::kInvert, 0.4f, -1}},        {{P::kShearY, 0.9f, 5}, {P::kSolarize, 0.2f, 6}},
      {{P::kInvert, 0.9f, -1}, {P::kAutoContrast, 0.8f, -1}}, {{P::kEqualize, 0.6f, -1}, {P::kRotate, 0.9f, 3}},
      {{P::kShearX, 0.9f, 4}, {P::kSolarize, 0.3f, 3}},       {{P::kShearY, 0.8f, 8}, {P::kInvert, 0.7f, -1}},
      {{P::kEqualize, 0.9f, -1}, {P::kTranslateY, 0.6f, 6}},  {{P::kInvert, 0.9f, -1}, {P::kEqualize, 0.6f, -1}},
      {{P::kContrast, 0.3f, 3}, {P::kRotate, 0.8f, 4}},       {{P::kInvert, 0.8f, -1}, {P::kTranslateY, 0.0f, 2}},
      {{P::kShearY, 0.7f, 6}, {P::kSolarize, 0.4f, 8}},       {{P::kInvert, 0.6f, -1}, {P::kRotate, 0.8f, 4}},
      {{P::kShearY, 0.3f, 7}, {P::kTranslateX, 0.9f, 3}},     {{P::kShearX, 0.1f, 6}, {P::kInvert, 0.6f, -1}},
      {{P::kSolarize, 0.7f, 2}, {P::kTranslateY, 0.6f, 7}},   {{P::kShearY, 0.8f, 4}, {P::kInvert, 0.8f, -1}},
      {{P::kShearX, 0.7f, 9}, {P::kTranslateY, 0.8f, 3}},     {{P::kShearY, 0.8f, 5}, {P::kAutoContrast, 0.7f, -1}},
      {{P::kShearX, 0.7f, 2}, {P::kInvert, 0.1f, -1}}};
  return which == v1::CIFAR10 ? cifar10 : which == v1::SVHN ? svhn : imagenet;
}

bool IsSigned(P op) {
  switch (op) {
    case P::kShearX:
    case P::kShearY:
    case P::kTranslateX:
    case P::kTranslateY:
    case P::kRotate:
    case P::kBrightness:
    case P::kColor:
    case P::kContrast:
    case P::kSharpness: return true;
    default: return false;
  }
}

// torch.randint(n): uniform in 0..n-1.
int RandInt(int n, Rng& rng) { return static_cast<int>(rng.UniformInt(0, n - 1)); }

const std::vector<SpaceOp>& AugMixSpace(bool all_ops) {
  static const std::vector<SpaceOp> some = {
      {P::kAutoContrast, false, false}, {P::kEqualize, false, false}, {P::kPosterize, true, false},
      {P::kRotate, true, true},         {P::kSolarize, true, false},  {P::kShearX, true, true},
      {P::kShearY, true, true},         {P::kTranslateX, true, true}, {P::kTranslateY, true, true}};
  static const std::vector<SpaceOp> all = [] {
    std::vector<SpaceOp> v = some;
    for (P op : {P::kBrightness, P::kColor, P::kContrast, P::kSharpness}) v.push_back({op, true, true});
    return v;
  }();
  return all_ops ? all : some;
}

}  // namespace

const char* PolicyOpName(PolicyOp op) {
  static const char* kNames[] = {"Identity",  "ShearX",     "ShearY",       "TranslateX", "TranslateY",
                                 "Rotate",    "Brightness", "Color",        "Contrast",   "Sharpness",
                                 "Posterize", "Solarize",   "AutoContrast", "Equalize",   "Invert"};
  return kNames[static_cast<int>(op)];
}

void ApplyPolicyOp(cv::Mat& image, const PolicyStep& step, bool bilinear, const std::optional<cv::Scalar>& fill,
                   GeometrySink* geometry) {
  const double m = step.magnitude;
  const cv::Scalar f = fill.value_or(cv::Scalar::all(0));
  const bool masked = fill.has_value();
  const double corner_x = -image.cols * 0.5, corner_y = -image.rows * 0.5;  // center=[0, 0]: the top-left corner
  switch (step.op) {
    case P::kShearX:
      image = WarpAffineMoving(image, InverseAffineMatrix(0, 0, 0, 1, std::atan(m) * 180 / M_PI, 0, corner_x, corner_y),
                               bilinear, f, masked, geometry);
      break;
    case P::kShearY:
      image = WarpAffineMoving(image, InverseAffineMatrix(0, 0, 0, 1, 0, std::atan(m) * 180 / M_PI, corner_x, corner_y),
                               bilinear, f, masked, geometry);
      break;
    case P::kTranslateX:
      image = WarpAffineMoving(image, InverseAffineMatrix(0, std::trunc(m), 0, 1, 0, 0), bilinear, f, masked, geometry);
      break;
    case P::kTranslateY:
      image = WarpAffineMoving(image, InverseAffineMatrix(0, 0, std::trunc(m), 1, 0, 0), bilinear, f, masked, geometry);
      break;
    case P::kRotate:
      image = WarpAffineMoving(image, InverseAffineMatrix(-m, 0, 0, 1, 0, 0), bilinear, f, masked, geometry);
      break;
    case P::kBrightness: AdjustBrightness(image, 1.0 + m); break;
    case P::kColor: AdjustSaturation(image, 1.0 + m); break;
    case P::kContrast: AdjustContrast(image, 1.0 + m); break;
    case P::kSharpness: AdjustSharpness(image, 1.0 + m); break;
    case P::kPosterize: Posterize(image, static_cast<int>(m)); break;
    case P::kSolarize: Solarize(image, static_cast<float>(m)); break;
    case P::kAutoContrast: Autocontrast(image); break;
    case P::kEqualize: Equalize(image); break;
    case P::kInvert: Invert(image); break;
    case P::kIdentity: break;
  }
}

std::vector<PolicyStep> DrawAutoAugment(v1::AutoAugmentPolicy policy, int height, int width, Rng& rng) {
  const Policy& table = PolicyTable(policy);
  const int id = RandInt(static_cast<int>(table.size()), rng);
  const double probs[2] = {rng.UniformDouble(), rng.UniformDouble()};
  const int signs[2] = {RandInt(2, rng), RandInt(2, rng)};
  std::vector<PolicyStep> steps;
  const SubPolicy subs[2] = {table[static_cast<size_t>(id)].first, table[static_cast<size_t>(id)].second};
  for (int i = 0; i < 2; ++i) {
    if (!(probs[i] <= subs[i].p)) continue;
    float magnitude = subs[i].bin < 0 ? 0 : Magnitude(Space::kAutoAugment, subs[i].op, 10, subs[i].bin, height, width);
    if (IsSigned(subs[i].op) && signs[i] == 0) magnitude = -magnitude;
    steps.push_back({subs[i].op, magnitude});
  }
  return steps;
}

std::vector<PolicyStep> DrawRandAugment(const v1::RandAugment& o, int height, int width, Rng& rng) {
  std::vector<PolicyStep> steps;
  for (int n = 0; n < o.num_ops(); ++n) {
    const SpaceOp& s = kRandAugmentSpace[static_cast<size_t>(RandInt(static_cast<int>(kRandAugmentSpace.size()), rng))];
    float magnitude =
        s.has_bins ? Magnitude(Space::kRandAugment, s.op, o.num_magnitude_bins(), o.magnitude(), height, width) : 0;
    if (s.signed_ && RandInt(2, rng) == 1) magnitude = -magnitude;
    steps.push_back({s.op, magnitude});
  }
  return steps;
}

std::vector<PolicyStep> DrawTrivialAugmentWide(const v1::TrivialAugmentWide& o, Rng& rng) {
  const SpaceOp& s = kRandAugmentSpace[static_cast<size_t>(RandInt(static_cast<int>(kRandAugmentSpace.size()), rng))];
  float magnitude = 0;
  if (s.has_bins) {
    const int bins = o.num_magnitude_bins();
    magnitude = Magnitude(Space::kTrivialWide, s.op, bins, RandInt(bins, rng), 0, 0);
  }
  if (s.signed_ && RandInt(2, rng) == 1) magnitude = -magnitude;
  return {{s.op, magnitude}};
}

AugMixDraw DrawAugMix(const v1::AugMix& o, int height, int width, Rng& rng) {
  AugMixDraw draw;
  const double a = GammaDraw(o.alpha(), rng), b = GammaDraw(o.alpha(), rng);
  draw.original = a / (a + b);
  std::vector<double> g(static_cast<size_t>(o.mixture_width()));
  double total = 0;
  for (double& x : g) total += x = GammaDraw(o.alpha(), rng);
  for (double x : g) draw.weights.push_back(x / total * (b / (a + b)));
  const std::vector<SpaceOp>& space = AugMixSpace(o.all_ops());
  for (int i = 0; i < o.mixture_width(); ++i) {
    const int depth = o.chain_depth() > 0 ? o.chain_depth() : 1 + RandInt(3, rng);
    std::vector<PolicyStep> chain;
    for (int k = 0; k < depth; ++k) {
      const SpaceOp& s = space[static_cast<size_t>(RandInt(static_cast<int>(space.size()), rng))];
      float magnitude = s.has_bins ? Magnitude(Space::kAugMix, s.op, 10, RandInt(o.severity(), rng), height, width) : 0;
      if (s.signed_ && RandInt(2, rng) == 1) magnitude = -magnitude;
      chain.push_back({s.op, magnitude});
    }
    draw.chains.push_back(std::move(chain));
  }
  return draw;
}

void ApplyAugMix(cv::Mat& image, const AugMixDraw& draw, bool bilinear, const std::optional<cv::Scalar>& fill) {
  cv::Mat mix;
  image.convertTo(mix, CV_32FC3, draw.original);
  for (size_t i = 0; i < draw.chains.size(); ++i) {
    cv::Mat aug = image.clone();
    for (const PolicyStep& step : draw.chains[i]) ApplyPolicyOp(aug, step, bilinear, fill);
    cv::Mat f;
    aug.convertTo(f, CV_32FC3);
    cv::scaleAdd(f, draw.weights[i], mix, mix);
  }
  for (int y = 0; y < image.rows; ++y) {
    const float* s = mix.ptr<float>(y);
    uint8_t* d = image.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols * 3; ++x) d[x] = static_cast<uint8_t>(std::clamp(s[x], 0.0f, 255.0f));
  }
}

namespace {

// torchvision's policies default to fill=None: no fill blended in.
std::optional<cv::Scalar> PolicyFill(const google::protobuf::RepeatedField<float>& fill) { return FillColour(fill); }

absl::Status CheckPolicyFill(const std::string& where, const google::protobuf::RepeatedField<float>& fill,
                             bool has_interpolation, v1::Interpolation interpolation) {
  if (auto s = CheckFill(where, fill); !s.ok()) return s;
  return CheckWarpInterpolation(where, has_interpolation, interpolation);
}

bool Bilinear(bool has, v1::Interpolation i) { return has && i == v1::BILINEAR; }

absl::Status IntRange(const std::string& where, int v, int lo, int hi) {
  if (v < lo || v > hi)
    return absl::InvalidArgumentError(absl::StrFormat("%s = %d; allowed range is %d..%d", where, v, lo, hi));
  return absl::OkStatus();
}

}  // namespace

const std::vector<OpEntry>& PolicyOps() {
  // The declared ranges (OpParam); the fill's count and the interpolation are checked by the entries.
  const OpParam kBins{"num_magnitude_bins", 2, 1000, 31};
  static const auto* ops = new std::vector<OpEntry>{
      WithParams({kFillParam},
                 {v1::Op::kAutoAugment, "transforms.AutoAugment",
                  [](const std::string& where, v1::Op& op, OpShape*) {
                    const auto& o = op.auto_augment();
                    return CheckPolicyFill(where + ".auto_augment", o.fill(), o.has_interpolation(), o.interpolation());
                  },
                  [](const v1::Op&) { return true; },
                  [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
                    const auto& o = op.auto_augment();
                    for (const PolicyStep& s : DrawAutoAugment(o.policy(), image.rows, image.cols, rng)) {
                      ApplyPolicyOp(image, s, Bilinear(o.has_interpolation(), o.interpolation()), PolicyFill(o.fill()),
                                    geometry);
                    }
                  },
                  OpTargets::kMoved}),
      WithParams({{"num_ops", 0, 16, 2}, {"magnitude", 0, 999, 9}, kBins, kFillParam},
                 {v1::Op::kRandAugment, "transforms.RandAugment",
                  [](const std::string& where, v1::Op& op, OpShape*) {
                    const auto& o = op.rand_augment();
                    const std::string w = where + ".rand_augment";
                    // A magnitude is one of the bins (the bins' own range is declared).
                    if (o.num_magnitude_bins() >= 2) {
                      if (auto s = IntRange(w + ".magnitude", o.magnitude(), 0, o.num_magnitude_bins() - 1); !s.ok())
                        return s;
                    }
                    return CheckPolicyFill(w, o.fill(), o.has_interpolation(), o.interpolation());
                  },
                  [](const v1::Op& op) { return op.rand_augment().num_ops() > 0; },
                  [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
                    const auto& o = op.rand_augment();
                    for (const PolicyStep& s : DrawRandAugment(o, image.rows, image.cols, rng)) {
                      ApplyPolicyOp(image, s, Bilinear(o.has_interpolation(), o.interpolation()), PolicyFill(o.fill()),
                                    geometry);
                    }
                  },
                  OpTargets::kMoved}),
      WithParams({kBins, kFillParam},
                 {v1::Op::kTrivialAugmentWide, "transforms.TrivialAugmentWide",
                  [](const std::string& where, v1::Op& op, OpShape*) {
                    const auto& o = op.trivial_augment_wide();
                    const std::string w = where + ".trivial_augment_wide";
                    return CheckPolicyFill(w, o.fill(), o.has_interpolation(), o.interpolation());
                  },
                  [](const v1::Op&) { return true; },
                  [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink* geometry) {
                    const auto& o = op.trivial_augment_wide();
                    for (const PolicyStep& s : DrawTrivialAugmentWide(o, rng)) {
                      ApplyPolicyOp(image, s, Bilinear(o.has_interpolation(), o.interpolation()), PolicyFill(o.fill()),
                                    geometry);
                    }
                  },
                  OpTargets::kMoved}),
      // chain_depth's default, -1, draws a depth of 1..3 per chain.
      WithParams({{"severity", 1, 10, 3},
                  {"mixture_width", 1, 16, 3},
                  {"chain_depth", 1, 16, -1},
                  {"alpha", 0, 1000, 1, "", true},
                  {"all_ops", 0, 1, 1},
                  kFillParam},
                 RefusesTargets("it blends differently warped copies",
                                {v1::Op::kAugmix, "transforms.AugMix",
                                 [](const std::string& where, v1::Op& op, OpShape*) {
                                   const auto& o = op.augmix();
                                   const std::string w = where + ".augmix";
                                   if (!(o.alpha() > 0 && o.alpha() <= 1000)) {
                                     return absl::InvalidArgumentError(
                                         absl::StrFormat("%s.alpha = %g; need 0 < alpha <= 1000", w, o.alpha()));
                                   }
                                   return CheckPolicyFill(w, o.fill(), o.has_interpolation(), o.interpolation());
                                 },
                                 [](const v1::Op&) { return true; },
                                 [](const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext&, GeometrySink*) {
                                   const auto& o = op.augmix();
                                   ApplyAugMix(image, DrawAugMix(o, image.rows, image.cols, rng),
                                               Bilinear(o.has_interpolation(), o.interpolation()),
                                               PolicyFill(o.fill()));
                                 }})),
  };
  return *ops;
}

}  // namespace stoker
