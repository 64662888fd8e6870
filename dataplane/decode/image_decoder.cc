#include "dataplane/decode/image_decoder.h"

// jpeglib.h needs FILE and size_t declared first.
#include <jerror.h>
#include <jpeglib.h>
#include <csetjmp>
#include <cstdio>

#include <algorithm>
#include <cmath>
#include <exception>

#include <opencv2/imgproc.hpp>
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_codecs.h"
#include "dataplane/decode/image_header.h"

namespace stoker {
namespace {

constexpr char kFailurePayload[] = "stoker.decode_failure";
constexpr char kTimerPayload[] = "stoker.timer";
constexpr char kSupportedFormats[] = "not an image in a supported format (JPEG, PNG, WebP, BMP, PNM, TIFF)";
constexpr int64_t kMaxSide = 1 << 20;  // OpenCV's own limit per side
// A progressive JPEG with more scans than this is refused: each scan is a
// pass over the whole coefficient buffer, and crafted files carry thousands.
constexpr int kMaxJpegScans = 1000;

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint32_t LittleEndian24(const unsigned char* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16);
}

bool StartsWith(absl::string_view bytes, absl::string_view magic, size_t at = 0) {
  return bytes.size() >= at + magic.size() && bytes.substr(at, magic.size()) == magic;
}

// libjpeg reports fatal errors through error_exit, which must not return:
// we jump back to the decode call. Warnings are counted; a premature end of
// data marks the file truncated.
struct JpegErrors {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
  bool truncated;
  jpeg_progress_mgr progress;
};

// Called by libjpeg between passes: refuses a progressive file with too many
// scans (it would burn CPU for minutes) through the usual error exit.
void JpegProgress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  const auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxJpegScans) {
    auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(e->message, sizeof(e->message), "more than %d progressive scans", kMaxJpegScans);
    std::longjmp(e->jump, 1);
  }
}

void JpegErrorExit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}

void JpegEmitMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace messages
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) e->truncated = true;
  ++cinfo->err->num_warnings;
}

// Creates a decompressor reporting through `errors`. The caller then sets the
// jump target (setjmp must run in the frame that libjpeg jumps back to).
void CreateDecompress(jpeg_decompress_struct* cinfo, JpegErrors* errors) {
  cinfo->err = jpeg_std_error(&errors->pub);
  errors->pub.error_exit = JpegErrorExit;
  errors->pub.emit_message = JpegEmitMessage;
  errors->truncated = false;
  jpeg_create_decompress(cinfo);  // zeroes everything but err
  errors->progress.progress_monitor = JpegProgress;
  cinfo->progress = &errors->progress;
}

// A region in the scaled output grid: floor of the start, rounded size,
// clamped to the scaled image.
struct ScaledRegion {
  int x, y, width, height;
};

// `m` is the scale in eighths (8: full size), as libjpeg's scale_num / 8:
// the scaled image is ceil(size * m / 8).
ScaledRegion Scale(const CropBox& box, int image_w, int image_h, int m) {
  const int out_w = (image_w * m + 7) / 8, out_h = (image_h * m + 7) / 8;
  ScaledRegion r;
  r.x = std::min(box.left * m / 8, out_w - 1);
  r.y = std::min(box.top * m / 8, out_h - 1);
  r.width = std::clamp(static_cast<int>(std::lround(box.width * m / 8.0)), 1, out_w - r.x);
  r.height = std::clamp(static_cast<int>(std::lround(box.height * m / 8.0)), 1, out_h - r.y);
  return r;
}

void CmykToRgb(const cv::Mat& cmyk, cv::Mat& rgb, bool adobe_inverted) {
  rgb.create(cmyk.rows, cmyk.cols, CV_8UC3);
  for (int y = 0; y < cmyk.rows; ++y) {
    const uint8_t* in = cmyk.ptr<uint8_t>(y);
    uint8_t* out = rgb.ptr<uint8_t>(y);
    for (int x = 0; x < cmyk.cols; ++x, in += 4, out += 3) {
      const int k = adobe_inverted ? in[3] : 255 - in[3];
      for (int c = 0; c < 3; ++c) {
        const int v = adobe_inverted ? in[c] : 255 - in[c];
        out[c] = static_cast<uint8_t>(v * k / 255);
      }
    }
  }
}

absl::StatusOr<cv::Mat> DecodeJpeg(absl::string_view bytes, const CropBox& box, int d, int64_t max_pixels) {
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  cv::Mat buffer;  // declared before setjmp; not read after a jump
  CreateDecompress(&cinfo, &errors);
  if (setjmp(errors.jump)) {
    jpeg_destroy_decompress(&cinfo);
    const bool truncated = errors.truncated || errors.pub.msg_code == JERR_INPUT_EMPTY;
    return DecodeError(truncated ? DecodeFailure::kTruncated : DecodeFailure::kCorrupt,
                       absl::StrCat("JPEG: ", errors.message));
  }
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  const int64_t pixels = int64_t{cinfo.image_width} * cinfo.image_height;
  if (max_pixels > 0 && pixels > max_pixels) {
    jpeg_destroy_decompress(&cinfo);
    return DecodeError(DecodeFailure::kTooLarge, absl::StrCat(cinfo.image_width, "x", cinfo.image_height,
                                                              " pixels exceed --max-pixels ", max_pixels));
  }
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGB;
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.scale_num = static_cast<unsigned int>(d);  // eighths
  cinfo.scale_denom = 8;
  jpeg_start_decompress(&cinfo);
  const CropBox full{0, 0, static_cast<int>(cinfo.image_height), static_cast<int>(cinfo.image_width)};
  const CropBox& want = box.width > 0 ? box : full;
  const ScaledRegion r = Scale(want, cinfo.image_width, cinfo.image_height, d);
  // Decode a margin around the region: chroma upsampling at a cropped edge
  // lacks its neighbours, which changes the edge pixels. The margin keeps the
  // pixels we return identical to a full decode.
  constexpr int kMargin = 8;
  const int out_w = static_cast<int>(cinfo.output_width), out_h = static_cast<int>(cinfo.output_height);
  const int ex0 = std::max(0, r.x - kMargin), ey0 = std::max(0, r.y - kMargin);
  const int ex1 = std::min(out_w, r.x + r.width + kMargin), ey1 = std::min(out_h, r.y + r.height + kMargin);
  // The decoder widens the column range to whole iMCUs; we keep the extra
  // columns in the buffer and return a view of the ones asked for.
  JDIMENSION xoffset = static_cast<JDIMENSION>(ex0), width = static_cast<JDIMENSION>(ex1 - ex0);
  if (width < cinfo.output_width) jpeg_crop_scanline(&cinfo, &xoffset, &width);
  if (ey0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(ey0));
  const int channels = cinfo.output_components;
  buffer.create(ey1 - ey0, static_cast<int>(width), CV_8UC(channels));
  for (int row = 0; row < buffer.rows;) {
    JSAMPROW rows[1] = {buffer.ptr<uint8_t>(row)};
    const JDIMENSION got = jpeg_read_scanlines(&cinfo, rows, 1);
    if (got == 0) {  // cannot happen with a memory source; never spin
      errors.truncated = true;
      break;
    }
    row += static_cast<int>(got);
  }
  const bool adobe = cinfo.saw_Adobe_marker;
  const bool truncated = errors.truncated;
  jpeg_abort_decompress(&cinfo);  // the rows below the region are not needed
  jpeg_destroy_decompress(&cinfo);
  if (truncated) return DecodeError(DecodeFailure::kTruncated, "JPEG: premature end of data");
  cv::Mat region = buffer(cv::Rect(r.x - static_cast<int>(xoffset), r.y - ey0, r.width, r.height));
  if (!cmyk) return region;
  cv::Mat rgb;
  CmykToRgb(region, rgb, adobe);
  return rgb;
}

// `expected`: the header's size (width 0: unknown); a decode of another size
// is corrupt.
absl::StatusOr<cv::Mat> DecodeOther(absl::string_view bytes, const CropBox& box, int d, int64_t max_pixels,
                                    const ImageInfo& expected) {
  absl::StatusOr<cv::Mat> rgb_or = DecodeOtherImage(bytes, max_pixels);
  if (!rgb_or.ok()) return DecodeError(DecodeFailure::kCorrupt, rgb_or.status().message());
  cv::Mat decoded = *std::move(rgb_or);
  if (max_pixels > 0 && int64_t{decoded.rows} * decoded.cols > max_pixels) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat(decoded.cols, "x", decoded.rows, " pixels exceed --max-pixels ", max_pixels));
  }
  if (expected.width > 0 && (decoded.cols != expected.width || decoded.rows != expected.height)) {
    return DecodeError(DecodeFailure::kCorrupt,
                       absl::StrCat("decoded ", decoded.cols, "x", decoded.rows, " pixels; the header states ",
                                    expected.width, "x", expected.height));
  }
  cv::Mat region = decoded;
  if (box.width > 0) {
    const cv::Rect rect =
        cv::Rect(box.left, box.top, box.width, box.height) & cv::Rect(0, 0, decoded.cols, decoded.rows);
    if (rect.empty()) {
      return DecodeError(DecodeFailure::kCorrupt,
                         absl::StrCat("the region ", box.width, "x", box.height, " at (", box.left, ", ", box.top,
                                      ") is outside the ", decoded.cols, "x", decoded.rows, " image"));
    }
    region = decoded(rect);
  }
  cv::Mat rgb = box.width > 0 ? region.clone() : region;  // contiguous, as before
  try {
    if (d < 8) {
      const ScaledRegion r = Scale({0, 0, rgb.rows, rgb.cols}, rgb.cols, rgb.rows, d);
      cv::resize(rgb, rgb, cv::Size(r.width, r.height), 0, 0, cv::INTER_AREA);
    }
  } catch (const std::exception& e) {
    return DecodeError(DecodeFailure::kCorrupt, e.what());
  }
  return rgb;
}

}  // namespace

const char* DecodeFailureName(DecodeFailure failure) {
  switch (failure) {
    case DecodeFailure::kEmpty: return "empty";
    case DecodeFailure::kNotAnImage: return "not_an_image";
    case DecodeFailure::kTruncated: return "truncated";
    case DecodeFailure::kCorrupt: return "corrupt";
    case DecodeFailure::kTooLarge: return "too_large";
    case DecodeFailure::kMissingField: return "missing_field";
    case DecodeFailure::kBadField: return "bad_field";
    case DecodeFailure::kTransform: return "transform";
    case DecodeFailure::kUnsupported: return "unsupported";
  }
  return "corrupt";
}

absl::Status DecodeError(DecodeFailure failure, absl::string_view detail) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(DecodeFailureName(failure), ": ", detail));
  status.SetPayload(kFailurePayload, absl::Cord(std::string(1, static_cast<char>(failure))));
  return status;
}

absl::Status TimerError(absl::string_view detail) {
  absl::Status s = absl::DeadlineExceededError(detail);
  s.SetPayload(kTimerPayload, absl::Cord("1"));
  return s;
}

bool IsTimerError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kDeadlineExceeded && status.GetPayload(kTimerPayload).has_value();
}

DecodeFailure DecodeFailureOf(const absl::Status& status) {
  auto payload = status.GetPayload(kFailurePayload);
  if (!payload || payload->size() != 1 || std::string(*payload)[0] > static_cast<char>(DecodeFailure::kUnsupported)) {
    return DecodeFailure::kCorrupt;
  }
  return static_cast<DecodeFailure>(std::string(*payload)[0]);
}

namespace {

// The header's size, refused when a side is 0 or past OpenCV's own limit.
absl::StatusOr<ImageInfo> Checked(ImageFormat format, int64_t width, int64_t height) {
  if (width < 1 || height < 1 || width > kMaxSide || height > kMaxSide) {
    return DecodeError(DecodeFailure::kCorrupt,
                       absl::StrCat("header states ", width, "x", height, " pixels; each side must be 1..", kMaxSide));
  }
  return ImageInfo{format, static_cast<int>(width), static_cast<int>(height)};
}

}  // namespace

bool LooksLikeJpeg(absl::string_view bytes) { return StartsWith(bytes, "\xFF\xD8\xFF"); }

absl::StatusOr<ImageInfo> ProbeImage(absl::string_view bytes) {
  if (bytes.empty()) return DecodeError(DecodeFailure::kEmpty, "zero-byte file");
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  ImageInfo info;
  if (LooksLikeJpeg(bytes)) {
    jpeg_decompress_struct cinfo;
    JpegErrors errors;
    CreateDecompress(&cinfo, &errors);
    if (setjmp(errors.jump)) {
      jpeg_destroy_decompress(&cinfo);
      return DecodeError(DecodeFailure::kCorrupt, absl::StrCat("JPEG header: ", errors.message));
    }
    jpeg_mem_src(&cinfo, u, static_cast<unsigned long>(bytes.size()));
    jpeg_read_header(&cinfo, TRUE);
    info = {ImageFormat::kJpeg, static_cast<int>(cinfo.image_width), static_cast<int>(cinfo.image_height)};
    jpeg_destroy_decompress(&cinfo);
    return info;
  }
  if (StartsWith(bytes, "\x89PNG\r\n\x1a\n")) {
    if (bytes.size() < 24 || !StartsWith(bytes, "IHDR", 12))
      return DecodeError(DecodeFailure::kTruncated, "PNG header");
    return Checked(ImageFormat::kPng, BigEndian32(u + 16), BigEndian32(u + 20));
  }
  if (StartsWith(bytes, "RIFF") && StartsWith(bytes, "WEBP", 8) && bytes.size() >= 30) {
    // Sizes come from the bitstream header; 0 (or past the limit) is corrupt.
    if (StartsWith(bytes, "VP8X", 12)) {
      return Checked(ImageFormat::kWebp, LittleEndian24(u + 24) + 1, LittleEndian24(u + 27) + 1);
    }
    if (StartsWith(bytes, "VP8 ", 12)) {
      return Checked(ImageFormat::kWebp, (u[26] | (u[27] << 8)) & 0x3fff, (u[28] | (u[29] << 8)) & 0x3fff);
    }
    if (StartsWith(bytes, "VP8L", 12)) {
      const uint32_t bits =
          uint32_t{u[21]} | (uint32_t{u[22]} << 8) | (uint32_t{u[23]} << 16) | (uint32_t{u[24]} << 24);
      return Checked(ImageFormat::kWebp, (bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1);
    }
  }
  // The other formats torchvision's ImageFolder lists, from their headers:
  // nothing is decoded to learn a size, so --max-pixels holds for every format.
  std::optional<HeaderSize> size = ReadBmpHeader(bytes);
  if (!size) size = ReadPnmHeader(bytes);
  if (!size) size = ReadTiffHeader(bytes);
  if (!size) return DecodeError(DecodeFailure::kNotAnImage, kSupportedFormats);
  return Checked(ImageFormat::kOther, size->width, size->height);
}

absl::StatusOr<cv::Mat> DecodeImage(absl::string_view bytes, const CropBox& region, int scale_eighths,
                                    int64_t max_pixels) {
  if (bytes.empty()) return DecodeError(DecodeFailure::kEmpty, "zero-byte file");
  if (scale_eighths < 1 || scale_eighths > 8) {
    return absl::InvalidArgumentError(absl::StrCat("scale ", scale_eighths, "/8; need 1/8 .. 8/8"));
  }
  if (LooksLikeJpeg(bytes)) return DecodeJpeg(bytes, region, scale_eighths, max_pixels);
  auto info = ProbeImage(bytes);
  if (!info.ok()) return info.status();
  if (max_pixels > 0 && int64_t{info->width} * info->height > max_pixels) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat(info->width, "x", info->height, " pixels exceed --max-pixels ", max_pixels));
  }
  return DecodeOther(bytes, region, scale_eighths, max_pixels, *info);
}

}  // namespace stoker
