// stoker-op-cost: what each pipeline op costs per image, so that a user can
// see what a recipe costs before running it. Each op runs on 224x224 RGB
// crops of the photos under --dir (or synthetic images without --dir), on
// one core, after a center_crop(224); the time of center_crop(224) alone is
// subtracted. Prints a table of microseconds per image, and JSON with --json.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/flag_names.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/user_ops/python_stage.h"
#include "dataplane/user_ops/user_ops.h"
#include "tests/testdata/image_set.h"

ABSL_FLAG(std::string, dir, "", "Photos (.jpg, searched recursively) to cut 224x224 inputs from; empty: synthetic");
ABSL_FLAG(int, images, 64, "Distinct input images");
ABSL_FLAG(int, rounds, 20, "Times each op runs over the inputs");
ABSL_FLAG(std::string, json, "", "Also write the figures here as JSON");
ABSL_FLAG(std::string, ops, "", "Ops to time, separated by ';' (default: every op with typical arguments)");
ABSL_FLAG(std::string, op_plugins, "", "Directory of op plugins to load (as stoker-server --op-plugins)");
ABSL_FLAG(std::vector<std::string>, python_transforms, {},
          "Python modules for python(...) ops (as stoker-server --python-transforms), run by one worker process");
ABSL_FLAG(std::string, python_executable, "python3", "Interpreter for --python-transforms");

namespace {

const char* kDefaultOps[] = {
    "random_horizontal_flip(1)",
    "resize(112, antialias=false), center_crop(112)",
    "resize(112), center_crop(112)",
    "color_jitter(0.4, 0.4, 0.4, 0.1)",
    "adjust_brightness(1.3)",
    "adjust_contrast(1.3)",
    "adjust_saturation(1.3)",
    "adjust_hue(0.1)",
    "solarize(128)",
    "posterize(4)",
    "equalize()",
    "autocontrast()",
    "adjust_sharpness(2)",
    "invert()",
    "grayscale()",
    "gaussian_blur(23, sigma=0.1:2)",
    "random_erasing(p=1)",
    "random_erasing(p=1, value_random=true)",
};

std::vector<cv::Mat> Inputs() {
  std::vector<cv::Mat> out;
  const std::string dir = absl::GetFlag(FLAGS_dir);
  if (!dir.empty()) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      if (e.is_regular_file() && absl::AsciiStrToLower(e.path().extension().string()) == ".jpg") {
        files.push_back(e.path().string());
      }
    }
    std::sort(files.begin(), files.end());
    for (const std::string& f : files) {
      if (static_cast<int>(out.size()) >= absl::GetFlag(FLAGS_images)) break;
      std::ifstream in(f, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), {});
      absl::StatusOr<cv::Mat> image = stoker::DecodeImage(bytes, {}, 8, 0);
      if (image.ok() && image->rows >= 224 && image->cols >= 224) out.push_back(*image);
    }
  }
  for (int i = 0; static_cast<int>(out.size()) < absl::GetFlag(FLAGS_images); ++i) {
    out.push_back(stoker::testing::SyntheticImage(300, 400, static_cast<uint64_t>(i)));
  }
  return out;
}

// The user ops the flags name (none by default).
stoker::UserOps LoadUserOps() {
  stoker::PythonStageConfig python;
  python.modules = absl::GetFlag(FLAGS_python_transforms);
  python.executable = absl::GetFlag(FLAGS_python_executable);
  absl::StatusOr<stoker::UserOps> user = stoker::StartUserOps(python, absl::GetFlag(FLAGS_op_plugins), nullptr);
  if (!user.ok()) {
    std::fprintf(stderr, "%s\n", std::string(user.status().message()).c_str());
    std::exit(2);
  }
  return *std::move(user);
}

// Microseconds per image of center_crop(224) followed by `ops`.
double Time(const std::string& ops, const std::vector<cv::Mat>& inputs) {
  static const stoker::UserOps user = LoadUserOps();
  stoker::v1::SessionConfig config;
  config.set_batch_size(1);
  const absl::StatusOr<std::vector<stoker::v1::Op>> parsed =
      stoker::ParsePipelineText(ops.empty() ? "center_crop(224)" : "center_crop(224), " + ops);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", std::string(parsed.status().message()).c_str());
    std::exit(2);
  }
  for (const stoker::v1::Op& op : *parsed) *config.add_pipeline() = op;
  const absl::StatusOr<stoker::Pipeline> pipeline = stoker::Pipeline::Create(config, user);
  if (!pipeline.ok()) {
    std::fprintf(stderr, "%s\n", std::string(pipeline.status().message()).c_str());
    std::exit(2);
  }
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const absl::Time start = absl::Now();
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      stoker::Rng rng = stoker::Rng::ForSample(1, r, static_cast<int64_t>(i));
      const absl::StatusOr<cv::Mat> out = pipeline->Apply(inputs[i], rng);
      if (!out.ok()) {
        std::fprintf(stderr, "%s: %s\n", ops.c_str(), std::string(out.status().message()).c_str());
        std::exit(1);
      }
    }
  }
  return absl::ToDoubleMicroseconds(absl::Now() - start) / (static_cast<double>(rounds) * inputs.size());
}

}  // namespace

int main(int argc, char** argv) {
  stoker::ParseFlags(argc, argv, "Times each pipeline op per 224x224 image on one core: stoker-op-cost [--dir DIR]");
  const std::vector<cv::Mat> inputs = Inputs();
  std::vector<std::string> ops;
  if (absl::GetFlag(FLAGS_ops).empty()) {
    ops.assign(std::begin(kDefaultOps), std::end(kDefaultOps));
  } else {
    for (const auto& part : absl::StrSplit(absl::GetFlag(FLAGS_ops), ';')) ops.emplace_back(part);
  }
  const double base = Time("", inputs);
  std::printf("%-44s %12s\n", "op (after center_crop(224), 224x224 in)", "us / image");
  std::printf("%-44s %12.1f\n", "center_crop(224) alone (subtracted below)", base);
  std::string json = absl::StrFormat("{\"images\": %d, \"base_us\": %.2f, \"ops\": {", inputs.size(), base);
  for (size_t i = 0; i < ops.size(); ++i) {
    const double us = std::max(0.0, Time(ops[i], inputs) - base);
    std::printf("%-44s %12.1f\n", ops[i].c_str(), us);
    absl::StrAppendFormat(&json, "%s\"%s\": %.2f", i ? ", " : "", ops[i], us);
  }
  json += "}}\n";
  if (!absl::GetFlag(FLAGS_json).empty()) std::ofstream(absl::GetFlag(FLAGS_json)) << json;
  return 0;
}
