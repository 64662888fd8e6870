#include "dataplane/sources/synthetic_source.h"

#include <opencv2/imgproc.hpp>
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/rng.h"
#include "dataplane/decode/image_codecs.h"

namespace stoker {
namespace {

constexpr int kDistinctImages = 16;

// A photo-like image: smooth colour gradients, a few shapes and grain, so
// that JPEG sizes and decode costs resemble real photographs.
std::string MakeJpeg(int width, int height, uint64_t seed) {
  Rng rng(seed);
  cv::Mat img(height, width, CV_8UC3);
  const double gx = rng.Uniform(-1, 1), gy = rng.Uniform(-1, 1);
  for (int y = 0; y < height; ++y) {
    auto* row = img.ptr<cv::Vec3b>(y);
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        row[x][c] = cv::saturate_cast<uint8_t>(128 + 90 * (gx * x / width + gy * y / height) * (c + 1) / 3.0);
      }
    }
  }
  for (int i = 0; i < 8; ++i) {
    const cv::Point p(static_cast<int>(rng.UniformInt(0, width - 1)), static_cast<int>(rng.UniformInt(0, height - 1)));
    cv::circle(img, p, static_cast<int>(rng.UniformInt(2, std::max(3, std::min(width, height) / 5))),
               cv::Scalar(rng.UniformInt(0, 255), rng.UniformInt(0, 255), rng.UniformInt(0, 255)), cv::FILLED);
  }
  cv::Mat grain(height, width, CV_8UC3);
  cv::theRNG().state = seed | 1;
  cv::randn(grain, cv::Scalar::all(128), cv::Scalar::all(6));
  cv::addWeighted(img, 1.0, grain, 1.0, -128, img);
  // `img` was drawn as OpenCV's BGR; the same file as before comes from its
  // channels in RGB order.
  cv::Mat rgb;
  cv::cvtColor(img, rgb, cv::COLOR_BGR2RGB);
  absl::StatusOr<std::string> jpeg = EncodeJpeg(rgb, 90);
  return jpeg.ok() ? *std::move(jpeg) : std::string();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const SyntheticSource>> SyntheticSource::Open(absl::string_view name) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset '", name, "': ", why, "; expected synthetic:WIDTHxHEIGHT[:SAMPLES[:CLASSES]]"));
  };
  if (!absl::StartsWith(name, kSyntheticPrefix)) return bad("not a synthetic dataset");
  std::vector<absl::string_view> parts = absl::StrSplit(name.substr(kSyntheticPrefix.size()), ':');
  std::vector<absl::string_view> dims = absl::StrSplit(parts[0], 'x');
  int width = 0, height = 0;
  if (parts.size() > 3 || dims.size() != 2 || !absl::SimpleAtoi(dims[0], &width) ||
      !absl::SimpleAtoi(dims[1], &height)) {
    return bad("size does not parse");
  }
  if (width < 1 || width > 8192 || height < 1 || height > 8192) return bad("width and height must be 1..8192");
  std::shared_ptr<SyntheticSource> s(new SyntheticSource());
  s->samples_ = 10000;
  s->classes_ = 1000;
  if (parts.size() > 1 && (!absl::SimpleAtoi(parts[1], &s->samples_) || s->samples_ < 1 || s->samples_ > 1000000000)) {
    return bad("samples must be 1..1000000000");
  }
  if (parts.size() > 2 && (!absl::SimpleAtoi(parts[2], &s->classes_) || s->classes_ < 1 || s->classes_ > 1000000)) {
    return bad("classes must be 1..1000000");
  }
  for (int32_t c = 0; c < s->classes_; ++c) s->class_names_.push_back(std::to_string(c));
  for (int i = 0; i < kDistinctImages; ++i) s->images_.push_back(MakeJpeg(width, height, 1000 + i));
  FingerprintBuilder fingerprint;
  for (const std::string& image : s->images_) fingerprint.Add(image);
  s->fingerprint_ = fingerprint.Add(s->samples_).Add(s->classes_).Finish();
  return std::shared_ptr<const SyntheticSource>(std::move(s));
}

std::string SyntheticSource::Describe(int64_t index) const { return absl::StrCat("synthetic#", index); }

absl::StatusOr<std::string> SyntheticSource::Read(int64_t index) const {
  return images_[static_cast<size_t>(index % kDistinctImages)];
}

}  // namespace stoker
