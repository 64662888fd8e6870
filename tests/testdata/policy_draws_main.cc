// stoker-policy-draws (test tool): exposes the augmentation policies to the
// tests that compare them with torchvision (python/tests/test_policies.py).
//   --policy P --draws N: draws N applications for a --height x --width image
//     and prints {"counts": {"Op:magnitude": n, ...}, "applications": N,
//     "steps": total} (magnitudes to 4 decimals);
//   --policy P --in A.png --out B.png: one application (seed --seed) to an
//     image, written out, with the draws printed as JSON, so that the test can
//     apply the same draws with torchvision;
//   --apply "Op:magnitude;..." --in A.png --out B.png: those ops in order.
// P is the pipeline text of one policy op, e.g. "rand_augment(2, 9)".
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/flag_names.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/ops/policy_ops.h"

ABSL_FLAG(std::string, policy, "", "One policy op in pipeline text");
ABSL_FLAG(int, draws, 0, "Applications to draw and count");
ABSL_FLAG(int, height, 224, "Image height for the draws (translations scale with it)");
ABSL_FLAG(int, width, 224, "Image width for the draws");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the draws");
ABSL_FLAG(std::string, apply, "", "Ops to apply: Name:magnitude;...");
ABSL_FLAG(std::string, in, "", "Input PNG");
ABSL_FLAG(std::string, out, "", "Output PNG");
ABSL_FLAG(bool, bilinear, false, "--apply: bilinear warps (else nearest)");
ABSL_FLAG(std::string, fill, "", "--apply: fill R:G:B (empty: torchvision's fill=None)");

namespace {

using stoker::PolicyOp;
using stoker::PolicyStep;

std::string Key(const PolicyStep& s) { return absl::StrFormat("%s:%.4f", stoker::PolicyOpName(s.op), s.magnitude); }

std::string StepsJson(const std::vector<PolicyStep>& steps) {
  std::vector<std::string> parts;
  for (const PolicyStep& s : steps)
    parts.push_back(absl::StrFormat("[\"%s\", %.9g]", stoker::PolicyOpName(s.op), s.magnitude));
  return "[" + absl::StrJoin(parts, ", ") + "]";
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "stoker-policy-draws: %s\n", what.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  stoker::ParseFlags(argc, argv, "Draws and applies augmentation policies for the tests: stoker-policy-draws --help");
  cv::Mat image;
  if (!absl::GetFlag(FLAGS_in).empty()) {
    image = cv::imread(absl::GetFlag(FLAGS_in), cv::IMREAD_COLOR);
    if (image.empty()) return Fail("cannot read " + absl::GetFlag(FLAGS_in));
    cv::cvtColor(image, image, cv::COLOR_BGR2RGB);
  }
  auto write = [&]() {
    cv::Mat bgr;
    cv::cvtColor(image, bgr, cv::COLOR_RGB2BGR);
    return cv::imwrite(absl::GetFlag(FLAGS_out), bgr) ? 0 : Fail("cannot write " + absl::GetFlag(FLAGS_out));
  };
  if (!absl::GetFlag(FLAGS_apply).empty()) {
    std::map<std::string, PolicyOp> names;
    for (int i = 0; i <= static_cast<int>(PolicyOp::kInvert); ++i)
      names[stoker::PolicyOpName(PolicyOp(i))] = PolicyOp(i);
    std::optional<cv::Scalar> fill;
    if (!absl::GetFlag(FLAGS_fill).empty()) {
      std::vector<std::string> v = absl::StrSplit(absl::GetFlag(FLAGS_fill), ':');
      fill = cv::Scalar(std::stod(v[0]), std::stod(v[1]), std::stod(v[2]));
    }
    for (absl::string_view part : absl::StrSplit(absl::GetFlag(FLAGS_apply), ';')) {
      std::vector<std::string> nm = absl::StrSplit(part, ':');
      float magnitude = 0;
      if (nm.size() != 2 || !names.count(nm[0]) || !absl::SimpleAtof(nm[1], &magnitude)) return Fail("bad --apply");
      stoker::ApplyPolicyOp(image, {names[nm[0]], magnitude}, absl::GetFlag(FLAGS_bilinear), fill);
    }
    return write();
  }
  absl::StatusOr<std::vector<stoker::v1::Op>> ops = stoker::ParsePipelineText(absl::GetFlag(FLAGS_policy));
  if (!ops.ok() || ops->size() != 1) return Fail("--policy must be one op");
  stoker::v1::Op op = (*ops)[0];
  const stoker::OpEntry* entry = stoker::FindOp(op);
  stoker::OpShape shape;
  if (entry == nullptr) return Fail("not a policy op");
  if (absl::Status s = stoker::CheckOp(*entry, "policy", op, &shape); !s.ok()) return Fail(std::string(s.message()));
  stoker::Rng rng(absl::GetFlag(FLAGS_seed));
  const int h = image.empty() ? absl::GetFlag(FLAGS_height) : image.rows;
  const int w = image.empty() ? absl::GetFlag(FLAGS_width) : image.cols;
  auto draw = [&]() -> std::vector<PolicyStep> {
    if (op.has_auto_augment()) return stoker::DrawAutoAugment(op.auto_augment().policy(), h, w, rng);
    if (op.has_rand_augment()) return stoker::DrawRandAugment(op.rand_augment(), h, w, rng);
    if (op.has_trivial_augment_wide()) return stoker::DrawTrivialAugmentWide(op.trivial_augment_wide(), rng);
    std::vector<PolicyStep> all;
    for (const auto& chain : stoker::DrawAugMix(op.augmix(), h, w, rng).chains)
      all.insert(all.end(), chain.begin(), chain.end());
    return all;
  };
  if (absl::GetFlag(FLAGS_draws) > 0) {
    std::map<std::string, int64_t> counts;
    int64_t steps = 0;
    for (int n = 0; n < absl::GetFlag(FLAGS_draws); ++n) {
      for (const PolicyStep& s : draw()) ++counts[Key(s)], ++steps;
    }
    std::vector<std::string> parts;
    for (const auto& [k, v] : counts) parts.push_back(absl::StrFormat("\"%s\": %d", k, v));
    absl::PrintF("{\"applications\": %d, \"steps\": %d, \"counts\": {%s}}\n", absl::GetFlag(FLAGS_draws), steps,
                 absl::StrJoin(parts, ", "));
    return 0;
  }
  if (image.empty()) return Fail("give --draws, or --in and --out");
  if (op.has_augmix()) {
    const stoker::AugMixDraw d = stoker::DrawAugMix(op.augmix(), h, w, rng);
    std::vector<std::string> chains, weights;
    for (const auto& c : d.chains) chains.push_back(StepsJson(c));
    for (double x : d.weights) weights.push_back(absl::StrFormat("%.17g", x));
    absl::PrintF("{\"original\": %.17g, \"weights\": [%s], \"chains\": [%s]}\n", d.original,
                 absl::StrJoin(weights, ", "), absl::StrJoin(chains, ", "));
    const auto& o = op.augmix();
    stoker::ApplyAugMix(image, d, o.has_interpolation() && o.interpolation() == stoker::v1::BILINEAR, std::nullopt);
    return write();
  }
  const std::vector<PolicyStep> steps = draw();
  absl::PrintF("{\"steps\": %s}\n", StepsJson(steps));
  for (const PolicyStep& s : steps) stoker::ApplyPolicyOp(image, s, false, std::nullopt);
  return write();
}
