// Generates small ImageFolder trees of synthetic JPEG photos (gradients,
// shapes and grain at ImageNet-like sizes) for tests and the demo.
// Deterministic for a seed. Thread-compatible.
#ifndef STOKER_TESTS_TESTDATA_IMAGE_SET_H_
#define STOKER_TESTS_TESTDATA_IMAGE_SET_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/status/status.h"

namespace stoker::testing {

struct ImageSetOptions {
  int classes = 4;
  int per_class = 16;
  int min_side = 200;  // pixels
  int max_side = 500;  // pixels
  int quality = 90;    // JPEG quality
  uint64_t seed = 1;
};

// Writes root/class_NNN/img_NNNN.jpg.
absl::Status WriteImageFolder(const std::filesystem::path& root, const ImageSetOptions& options);

// One synthetic RGB image of the given size.
cv::Mat SyntheticImage(int height, int width, uint64_t seed);

// Encodes RGB pixels as JPEG (through OpenCV), optionally progressive.
std::string EncodeJpeg(const cv::Mat& rgb, int quality, bool progressive = false);

// Encodes 4-channel CMYK data as an Adobe (inverted) CMYK JPEG through libjpeg.
std::string EncodeCmykJpeg(const cv::Mat& cmyk, int quality);

// Encodes an 8-bit single-channel index image with a palette (RGB triples)
// as a palette PNG (colour type 3).
std::string EncodePalettePng(const cv::Mat& indices, const std::vector<cv::Vec3b>& palette);

// Encodes with OpenCV for the given extension (".png", ".webp"); the image
// is given in RGB(A) order or as 16-bit.
std::string EncodeWithOpenCv(const cv::Mat& rgb, const std::string& ext);

}  // namespace stoker::testing

#endif  // STOKER_TESTS_TESTDATA_IMAGE_SET_H_
