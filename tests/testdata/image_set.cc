#include "tests/testdata/image_set.h"

#include <fstream>

#include "absl/strings/str_format.h"
#include "common/rng.h"
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace stoker::testing {

cv::Mat SyntheticImage(int height, int width, uint64_t seed) {
  Rng rng(seed);
  cv::Mat img(height, width, CV_8UC3);
  const double gx = rng.Uniform(-1, 1), gy = rng.Uniform(-1, 1);
  const int base[3] = {static_cast<int>(rng.UniformInt(30, 220)), static_cast<int>(rng.UniformInt(30, 220)),
                       static_cast<int>(rng.UniformInt(30, 220))};
  for (int y = 0; y < height; ++y) {
    auto* row = img.ptr<cv::Vec3b>(y);
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) {
        const double v = base[c] + 60 * (gx * x / width + gy * y / height) * (c + 1) / 2.0;
        row[x][c] = cv::saturate_cast<uint8_t>(v);
      }
    }
  }
  for (int i = 0; i < 6; ++i) {
    const cv::Scalar color(rng.UniformInt(0, 255), rng.UniformInt(0, 255), rng.UniformInt(0, 255));
    const cv::Point p(static_cast<int>(rng.UniformInt(0, width - 1)), static_cast<int>(rng.UniformInt(0, height - 1)));
    if (i % 2) {
      cv::circle(img, p, static_cast<int>(rng.UniformInt(5, std::max(6, height / 4))), color, cv::FILLED);
    } else {
      const cv::Point q(static_cast<int>(rng.UniformInt(0, width - 1)), static_cast<int>(rng.UniformInt(0, height - 1)));
      cv::rectangle(img, p, q, color, cv::FILLED);
    }
  }
  cv::Mat grain(height, width, CV_8UC3);
  cv::theRNG().state = seed;  // keep cv::randn deterministic too
  cv::randn(grain, cv::Scalar::all(128), cv::Scalar::all(8));
  cv::addWeighted(img, 1.0, grain, 1.0, -128, img);
  return img;
}

std::string EncodeJpeg(const cv::Mat& rgb, int quality) {
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  std::vector<uint8_t> buf;
  cv::imencode(".jpg", bgr, buf, {cv::IMWRITE_JPEG_QUALITY, quality});
  return std::string(buf.begin(), buf.end());
}

absl::Status WriteImageFolder(const std::filesystem::path& root, const ImageSetOptions& o) {
  Rng rng(o.seed);
  for (int c = 0; c < o.classes; ++c) {
    const std::filesystem::path dir = root / absl::StrFormat("class_%03d", c);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrFormat("mkdir %s: %s", dir.string(), ec.message()));
    for (int i = 0; i < o.per_class; ++i) {
      const int h = static_cast<int>(rng.UniformInt(o.min_side, o.max_side));
      const int w = static_cast<int>(rng.UniformInt(o.min_side, o.max_side));
      const std::string jpeg = EncodeJpeg(SyntheticImage(h, w, rng.Next()), o.quality);
      const std::filesystem::path file = dir / absl::StrFormat("img_%04d.jpg", i);
      std::ofstream(file, std::ios::binary).write(jpeg.data(), static_cast<std::streamsize>(jpeg.size()));
    }
  }
  return absl::OkStatus();
}

}  // namespace stoker::testing
