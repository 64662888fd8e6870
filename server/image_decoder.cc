#include "server/image_decoder.h"

#include <turbojpeg.h>

#include <exception>
#include <memory>

#include "absl/strings/str_cat.h"
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

namespace stoker {
namespace {

struct TjDeleter {
  void operator()(void* h) const { tjDestroy(h); }
};

absl::StatusOr<cv::Mat> DecodeJpeg(absl::string_view bytes) {
  std::unique_ptr<void, TjDeleter> tj(tjInitDecompress());
  if (!tj) return absl::InternalError("decode: tjInitDecompress failed");
  auto* src = reinterpret_cast<const unsigned char*>(bytes.data());
  const unsigned long size = static_cast<unsigned long>(bytes.size());
  int width = 0, height = 0, subsamp = 0, colorspace = 0;
  if (tjDecompressHeader3(tj.get(), src, size, &width, &height, &subsamp, &colorspace) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("decode: bad JPEG header: ", tjGetErrorStr2(tj.get())));
  }
  if (colorspace == TJCS_CMYK || colorspace == TJCS_YCCK) {
    // TurboJPEG cannot convert CMYK to RGB; OpenCV's libjpeg path can.
    return absl::UnimplementedError("decode: CMYK JPEG");
  }
  cv::Mat rgb(height, width, CV_8UC3);
  if (tjDecompress2(tj.get(), src, size, rgb.data, width, static_cast<int>(rgb.step), height, TJPF_RGB,
                    TJFLAG_FASTDCT) != 0 &&
      tjGetErrorCode(tj.get()) == TJERR_FATAL) {
    return absl::InvalidArgumentError(absl::StrCat("decode: corrupt JPEG: ", tjGetErrorStr2(tj.get())));
  }
  return rgb;
}

absl::StatusOr<cv::Mat> DecodeWithOpenCv(absl::string_view bytes) {
  cv::Mat decoded;
  try {
    const cv::Mat buf(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data()));
    decoded = cv::imdecode(buf, cv::IMREAD_COLOR);  // 8-bit BGR whatever the source depth
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("decode: ", e.what()));
  }
  if (decoded.empty()) return absl::InvalidArgumentError("decode: not a decodable image (unknown format or corrupt)");
  cv::Mat rgb;
  cv::cvtColor(decoded, rgb, cv::COLOR_BGR2RGB);
  return rgb;
}

}  // namespace

bool LooksLikeJpeg(absl::string_view bytes) {
  return bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
         static_cast<unsigned char>(bytes[1]) == 0xD8 && static_cast<unsigned char>(bytes[2]) == 0xFF;
}

absl::StatusOr<cv::Mat> DecodeImage(absl::string_view bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("decode: empty file");
  if (LooksLikeJpeg(bytes)) {
    auto rgb = DecodeJpeg(bytes);
    if (rgb.ok() || !absl::IsUnimplemented(rgb.status())) return rgb;
  }
  return DecodeWithOpenCv(bytes);
}

}  // namespace stoker
