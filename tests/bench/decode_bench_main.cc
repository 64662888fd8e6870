// stoker-decode-bench: the cost of just decoding. Loads every *.jpg/*.jpeg
// under --dir into memory, then decodes each whole file to RGB on one thread
// with libjpeg-turbo's TurboJPEG API (default accurate DCT and fancy
// upsampling, as the server's decoder uses), and prints images/s.
#include <turbojpeg.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "common/flag_names.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"

ABSL_FLAG(std::string, dir, "", "Directory searched recursively for .jpg/.jpeg files");
ABSL_FLAG(int, limit, 0, "Decode at most this many files; 0: all");
ABSL_FLAG(int, rounds, 1, "Decode the set this many times");
ABSL_FLAG(std::string, pipeline, "",
          "Instead of a full decode, run the server's per-sample work (stoker's decoder and these ops, e.g. "
          "'random_resized_crop(224), random_horizontal_flip(0.5)') on one core, without transport");

int main(int argc, char** argv) {
  stoker::ParseFlags(argc, argv, "Times full libjpeg-turbo decodes on one core: stoker-decode-bench --dir DIR");
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(absl::GetFlag(FLAGS_dir))) {
    const std::string ext = absl::AsciiStrToLower(e.path().extension().string());
    if (e.is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (absl::GetFlag(FLAGS_limit) > 0 && static_cast<int>(files.size()) > absl::GetFlag(FLAGS_limit)) {
    files.resize(static_cast<size_t>(absl::GetFlag(FLAGS_limit)));
  }
  if (files.empty()) {
    std::fprintf(stderr, "stoker-decode-bench: no JPEG files under --dir\n");
    return 2;
  }
  std::vector<std::string> data;
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    data.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  tjhandle tj = tjInitDecompress();
  std::vector<unsigned char> rgb;
  int64_t decoded = 0, failed = 0;
  std::optional<stoker::Pipeline> pipeline;
  if (!absl::GetFlag(FLAGS_pipeline).empty()) {
    auto ops = stoker::ParsePipelineText(absl::GetFlag(FLAGS_pipeline));
    stoker::v1::SessionConfig config;
    config.set_batch_size(1);
    if (ops.ok()) {
      for (auto& op : *ops) *config.add_pipeline() = op;
    }
    auto p = ops.ok() ? stoker::Pipeline::Create(config) : absl::StatusOr<stoker::Pipeline>(ops.status());
    if (!p.ok()) {
      std::fprintf(stderr, "stoker-decode-bench: %s\n", p.status().ToString().c_str());
      return 2;
    }
    pipeline = *std::move(p);
    rgb.resize(static_cast<size_t>(pipeline->sample_bytes()));
  }
  const absl::Time start = absl::Now();
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds) && pipeline; ++round) {
    for (size_t i = 0; i < data.size(); ++i) {
      stoker::Rng rng = stoker::Rng::ForSample(0, round, static_cast<int64_t>(i));
      stoker::SampleTimes times;
      if (!pipeline->Produce(data[i], rng, 0, rgb.data(), &times).ok()) ++failed;
      ++decoded;
    }
  }
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds) && !pipeline; ++round) {
    for (const std::string& d : data) {
      int w = 0, h = 0, subsamp = 0, cs = 0;
      auto* src = reinterpret_cast<const unsigned char*>(d.data());
      if (tjDecompressHeader3(tj, src, d.size(), &w, &h, &subsamp, &cs) != 0) {
        ++failed;
        continue;
      }
      rgb.resize(static_cast<size_t>(w) * h * 3);
      if (tjDecompress2(tj, src, d.size(), rgb.data(), w, 0, h, TJPF_RGB, 0) != 0) ++failed;
      ++decoded;
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  tjDestroy(tj);
  std::printf("{\"images\": %lld, \"failed\": %lld, \"seconds\": %.3f, \"images_per_second\": %.1f}\n",
              static_cast<long long>(decoded), static_cast<long long>(failed), seconds, decoded / seconds);
  return 0;
}
