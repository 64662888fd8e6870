#include "dataplane/decode/image_codecs.h"

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <png.h>
#include <tiffio.h>
#include <webp/decode.h>
#include <csetjmp>
#include <cstdio>

#include <algorithm>
#include <cctype>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

// stb_image (Debian's libstb-dev header) for BMP only, its
// functions private to this file.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_NO_THREAD_LOCALS  // stbi_failure_reason is unused; errors come back per call below
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include <stb/stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace stoker {
namespace {

absl::Status Bad(absl::string_view format, absl::string_view detail) {
  return absl::InvalidArgumentError(absl::StrCat(format, ": ", detail));
}

// --- PNG (libpng) -------------------------------------------------------------

struct PngSource {
  absl::string_view bytes;
  size_t offset = 0;
  char message[200] = "";
};

void PngRead(png_structp png, png_bytep out, png_size_t length) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (src->bytes.size() - src->offset < length) png_error(png, "premature end of data");
  std::memcpy(out, src->bytes.data() + src->offset, length);
  src->offset += length;
}

void PngError(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof(src->message), "%s", message);
  png_longjmp(png, 1);
}

void PngWarning(png_structp, png_const_charp) {}

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

absl::Status CheckPixels(absl::string_view format, int64_t width, int64_t height, int64_t max_pixels) {
  if (max_pixels > 0 && width * height > max_pixels) {
    return Bad(format, absl::StrCat(width, "x", height, " pixels exceed the limit of ", max_pixels));
  }
  return absl::OkStatus();
}

absl::StatusOr<cv::Mat> DecodePng(absl::string_view bytes, int64_t max_pixels) {
  if (bytes.size() < 24) return Bad("PNG", "premature end of data");
  if (bytes.substr(12, 4) != "IHDR") return Bad("PNG", "the first chunk is not IHDR");
  // The size from IHDR (as ProbeImage read it) so that every C++ object is
  // made before libpng may longjmp; libpng's own reading is checked against it.
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  const uint32_t width = BigEndian32(u + 16), height = BigEndian32(u + 20);
  if (width == 0 || height == 0 || width > (1u << 20) || height > (1u << 20)) return Bad("PNG", "bad IHDR size");
  if (absl::Status s = CheckPixels("PNG", width, height, max_pixels); !s.ok()) return s;
  cv::Mat rgb(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  std::vector<png_bytep> rows(height);
  for (uint32_t y = 0; y < height; ++y) rows[y] = rgb.ptr<png_byte>(static_cast<int>(y));
  PngSource src;
  src.bytes = bytes;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, PngError, PngWarning);
  if (png == nullptr) return absl::ResourceExhaustedError("PNG: cannot create a decoder");
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return Bad("PNG", src.message[0] != '\0' ? src.message : "cannot create a decoder");
  }
  png_set_read_fn(png, &src, PngRead);
  png_read_info(png, info);
  if (png_get_image_width(png, info) != width || png_get_image_height(png, info) != height) {
    png_error(png, "IHDR read twice gave two sizes");
  }
  const int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
  // The transforms imdecode(IMREAD_COLOR) asks of libpng, with RGB order:
  // 16-bit to its high byte, alpha dropped (not blended), palettes and low
  // grey depths expanded, grey replicated.
  if (depth == 16) png_set_strip_16(png);
  png_set_strip_alpha(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if ((color & PNG_COLOR_MASK_COLOR) == 0 && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if ((color & PNG_COLOR_MASK_COLOR) == 0) png_set_gray_to_rgb(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != size_t{width} * 3) png_error(png, "unexpected row size after transforms");
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return rgb;
}

struct PngSink {
  std::string out;
  char message[200] = "";
};

void PngWrite(png_structp png, png_bytep data, png_size_t length) {
  static_cast<PngSink*>(png_get_io_ptr(png))->out.append(reinterpret_cast<const char*>(data), length);
}

void PngFlush(png_structp) {}

void PngWriteError(png_structp png, png_const_charp message) {
  auto* sink = static_cast<PngSink*>(png_get_error_ptr(png));
  std::snprintf(sink->message, sizeof(sink->message), "%s", message);
  png_longjmp(png, 1);
}

// --- TIFF (libtiff) -------------------------------------------------------------

struct TiffSource {
  absl::string_view bytes;
  toff_t offset = 0;
  std::string message;
};

tmsize_t TiffRead(thandle_t h, void* out, tmsize_t size) {
  auto* src = static_cast<TiffSource*>(h);
  if (size < 0 || src->offset >= src->bytes.size()) return 0;
  const tmsize_t n = std::min<tmsize_t>(size, static_cast<tmsize_t>(src->bytes.size() - src->offset));
  std::memcpy(out, src->bytes.data() + src->offset, static_cast<size_t>(n));
  src->offset += static_cast<toff_t>(n);
  return n;
}
tmsize_t TiffWrite(thandle_t, void*, tmsize_t) { return 0; }
toff_t TiffSeek(thandle_t h, toff_t offset, int whence) {
  auto* src = static_cast<TiffSource*>(h);
  toff_t base = 0;
  if (whence == SEEK_CUR) base = src->offset;
  if (whence == SEEK_END) base = src->bytes.size();
  if (offset > UINT64_MAX - base) return static_cast<toff_t>(-1);
  src->offset = base + offset;
  return src->offset;
}
int TiffClose(thandle_t) { return 0; }
toff_t TiffSize(thandle_t h) { return static_cast<TiffSource*>(h)->bytes.size(); }
int TiffMap(thandle_t, void**, toff_t*) { return 0; }
void TiffUnmap(thandle_t, void*, toff_t) {}

int TiffError(TIFF*, void* user, const char* module, const char* format, va_list args) {
  auto* src = static_cast<TiffSource*>(user);
  if (src->message.empty()) {
    char text[200];
    std::vsnprintf(text, sizeof(text), format, args);
    src->message = module != nullptr ? absl::StrCat(module, ": ", text) : text;
  }
  return 1;  // handled: libtiff prints nothing
}
int TiffWarning(TIFF*, void*, const char*, const char*, va_list) { return 1; }

absl::StatusOr<cv::Mat> DecodeTiff(absl::string_view bytes, int64_t max_pixels) {
  TiffSource src;
  src.bytes = bytes;
  TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
  TIFFOpenOptionsSetErrorHandlerExtR(options, TiffError, &src);
  TIFFOpenOptionsSetWarningHandlerExtR(options, TiffWarning, &src);
  TIFFOpenOptionsSetMaxSingleMemAlloc(options, tmsize_t{1} << 30);
  TIFF* tif = TIFFClientOpenExt("tiff", "rm", &src, TiffRead, TiffWrite, TiffSeek, TiffClose, TiffSize, TiffMap,
                                TiffUnmap, options);
  TIFFOpenOptionsFree(options);
  if (tif == nullptr) return Bad("TIFF", src.message.empty() ? "cannot open" : src.message);
  uint32_t width = 0, height = 0;
  TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width);
  TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height);
  if (width == 0 || height == 0 || width > (1u << 20) || height > (1u << 20)) {
    TIFFClose(tif);
    return Bad("TIFF", absl::StrCat("header states ", width, "x", height, " pixels"));
  }
  if (absl::Status s = CheckPixels("TIFF", width, height, max_pixels); !s.ok()) {
    TIFFClose(tif);
    return s;
  }
  // libtiff's RGBA interface reads every photometric, depth and layout.
  std::vector<uint32_t> raster(size_t{width} * height);
  const int ok = TIFFReadRGBAImageOriented(tif, width, height, raster.data(), ORIENTATION_TOPLEFT, 0);
  TIFFClose(tif);
  if (!ok) return Bad("TIFF", src.message.empty() ? "cannot decode" : src.message);
  cv::Mat rgb(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  for (uint32_t y = 0; y < height; ++y) {
    auto* row = rgb.ptr<uint8_t>(static_cast<int>(y));
    const uint32_t* in = raster.data() + size_t{y} * width;
    for (uint32_t x = 0; x < width; ++x) {
      row[3 * x] = static_cast<uint8_t>(TIFFGetR(in[x]));
      row[3 * x + 1] = static_cast<uint8_t>(TIFFGetG(in[x]));
      row[3 * x + 2] = static_cast<uint8_t>(TIFFGetB(in[x]));
    }
  }
  return rgb;
}

// --- WebP (libwebp) -------------------------------------------------------------

absl::StatusOr<cv::Mat> DecodeWebp(absl::string_view bytes, int64_t max_pixels) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  int width = 0, height = 0;
  if (!WebPGetInfo(data, bytes.size(), &width, &height) || width <= 0 || height <= 0) {
    return Bad("WebP", "not a WebP bitstream libwebp reads");
  }
  if (absl::Status s = CheckPixels("WebP", width, height, max_pixels); !s.ok()) return s;
  cv::Mat rgb(height, width, CV_8UC3);
  if (WebPDecodeRGBInto(data, bytes.size(), rgb.data, rgb.total() * 3, static_cast<int>(rgb.step)) == nullptr) {
    return Bad("WebP", "corrupt or truncated bitstream");
  }
  return rgb;
}

// --- BMP, PNM (stb_image) -------------------------------------------------------

// A binary PNM header: `count` numbers (width, height[, maxval]) after the
// magic, with whitespace and comments; returns where the samples start.
absl::StatusOr<size_t> ReadPnmNumbers(absl::string_view bytes, int count, int64_t* numbers) {
  size_t pos = 2;
  for (int i = 0; i < count; ++i) {
    for (;;) {  // whitespace and comments before each number
      if (pos >= bytes.size()) return Bad("PNM", "premature end of header");
      if (bytes[pos] == '#') {
        while (pos < bytes.size() && bytes[pos] != '\n') ++pos;
      } else if (std::isspace(static_cast<unsigned char>(bytes[pos]))) {
        ++pos;
      } else {
        break;
      }
    }
    if (!std::isdigit(static_cast<unsigned char>(bytes[pos]))) return Bad("PNM", "malformed header");
    numbers[i] = 0;
    while (pos < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[pos])) && numbers[i] <= (1 << 20)) {
      numbers[i] = numbers[i] * 10 + (bytes[pos++] - '0');
    }
  }
  if (numbers[0] < 1 || numbers[1] < 1 || numbers[0] > (1 << 20) || numbers[1] > (1 << 20)) {
    return Bad("PNM", "bad size");
  }
  return pos + 1;  // the single whitespace before the samples
}

uint32_t LittleEndian(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// stb_image reads past the end of a BMP's pixels as zeros: an uncompressed
// BMP shorter than its rows is truncated.
bool BmpIsTruncated(absl::string_view bytes) {
  if (bytes.size() < 34) return true;
  const auto* u = reinterpret_cast<const unsigned char*>(bytes.data());
  if (LittleEndian(u + 14, 4) < 40) return false;  // an OS/2 header: left to stb_image
  const uint64_t offset = LittleEndian(u + 10, 4), width = LittleEndian(u + 18, 4), bpp = LittleEndian(u + 28, 2);
  const int32_t height = static_cast<int32_t>(LittleEndian(u + 22, 4));
  if (LittleEndian(u + 30, 4) != 0 /* BI_RGB */) return false;
  const uint64_t rows = height < 0 ? uint64_t{0} - static_cast<int64_t>(height) : static_cast<uint64_t>(height);
  const uint64_t stride = (width * bpp + 31) / 32 * 4;
  return bytes.size() < offset + stride * rows;
}

absl::StatusOr<cv::Mat> DecodeWithStb(absl::string_view bytes, absl::string_view format, int64_t max_pixels) {
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) return Bad(format, "file over 2 GiB");
  if (BmpIsTruncated(bytes)) return Bad(format, "premature end of data");
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()), static_cast<int>(bytes.size()), &width,
                             &height, &channels)) {
    return Bad(format, "unreadable header");
  }
  if (absl::Status s = CheckPixels(format, width, height, max_pixels); !s.ok()) return s;
  unsigned char* pixels = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                                static_cast<int>(bytes.size()), &width, &height, &channels, 3);
  if (pixels == nullptr) return Bad(format, "corrupt, truncated or a variant not read (RLE)");
  cv::Mat rgb = cv::Mat(height, width, CV_8UC3, pixels).clone();
  stbi_image_free(pixels);
  return rgb;
}

// PGM (P5) and PPM (P6): grey or RGB samples, one byte each up to a maxval
// of 255, else two (big-endian), of which the high byte is kept. Grey is
// replicated. (stb_image's reader of 16-bit files overflows its buffer on
// crafted headers: found by fuzzing, so PNM is read here.)
absl::StatusOr<cv::Mat> DecodePgmPpm(absl::string_view bytes, int64_t max_pixels) {
  int64_t n[3];
  absl::StatusOr<size_t> start = ReadPnmNumbers(bytes, 3, n);
  if (!start.ok()) return start.status();
  const int64_t width = n[0], height = n[1], maxval = n[2];
  if (maxval < 1 || maxval > 65535) return Bad("PNM", absl::StrCat("maxval ", maxval, "; need 1..65535"));
  if (absl::Status s = CheckPixels("PNM", width, height, max_pixels); !s.ok()) return s;
  const int channels = bytes[1] == '6' ? 3 : 1, sample = maxval > 255 ? 2 : 1;
  const uint64_t row_bytes = uint64_t(width) * channels * sample;
  if (*start > bytes.size() || (bytes.size() - *start) / row_bytes < uint64_t(height)) {
    return Bad("PNM", "premature end of data");
  }
  cv::Mat rgb(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  for (int y = 0; y < rgb.rows; ++y) {
    const auto* in = reinterpret_cast<const uint8_t*>(bytes.data() + *start + row_bytes * static_cast<uint64_t>(y));
    auto* row = rgb.ptr<uint8_t>(y);
    for (int x = 0; x < rgb.cols; ++x) {
      for (int c = 0; c < 3; ++c) row[3 * x + c] = in[(x * channels + (channels == 3 ? c : 0)) * sample];
    }
  }
  return rgb;
}

// ASCII PNM: PBM (P1, 1 is black; digits may touch), PGM (P2) and PPM (P3),
// samples as decimal numbers. As OpenCV read them: a maxval under 255 is
// scaled to 255 (integer division), above 255 the high byte is kept, values
// over the maxval saturate.
absl::StatusOr<cv::Mat> DecodeAsciiPnm(absl::string_view bytes, int64_t max_pixels) {
  const char kind = bytes[1];
  int64_t n[3] = {0, 0, 1};
  absl::StatusOr<size_t> start = ReadPnmNumbers(bytes, kind == '1' ? 2 : 3, n);
  if (!start.ok()) return start.status();
  const int64_t width = n[0], height = n[1], maxval = n[2];
  if (maxval < 1 || maxval > 65535) return Bad("PNM", absl::StrCat("maxval ", maxval, "; need 1..65535"));
  if (absl::Status s = CheckPixels("PNM", width, height, max_pixels); !s.ok()) return s;
  const int channels = kind == '3' ? 3 : 1;
  size_t pos = *start - 1;  // the whitespace after the header is not required before a P1 digit
  const size_t count = static_cast<size_t>(width * height) * static_cast<size_t>(channels);
  if (bytes.size() - pos < count) return Bad("PNM", "premature end of data");  // a digit a sample at least
  cv::Mat rgb(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  uint8_t* out = rgb.data;
  for (size_t i = 0; i < count; ++i) {
    while (pos < bytes.size() && (std::isspace(static_cast<unsigned char>(bytes[pos])) || bytes[pos] == '#')) {
      if (bytes[pos] == '#') {
        while (pos < bytes.size() && bytes[pos] != '\n') ++pos;
      } else {
        ++pos;
      }
    }
    if (pos >= bytes.size()) return Bad("PNM", "premature end of data");
    if (!std::isdigit(static_cast<unsigned char>(bytes[pos]))) return Bad("PNM", "a sample is not a number");
    int64_t v = 0;
    if (kind == '1') {
      v = bytes[pos++] == '1' ? 0 : 255;
    } else {
      while (pos < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[pos]))) {
        v = std::min<int64_t>(v * 10 + (bytes[pos++] - '0'), 1 << 20);
      }
      v = std::min(v, maxval);
      v = maxval > 255 ? v >> 8 : maxval < 255 ? v * 255 / maxval : v;
    }
    const uint8_t value = static_cast<uint8_t>(v);
    if (channels == 3) {
      *out++ = value;
    } else {
      out[0] = out[1] = out[2] = value;
      out += 3;
    }
  }
  return rgb;
}

// PAM (P7): WIDTH, HEIGHT, DEPTH (1 to 4) and MAXVAL lines up to ENDHDR, then
// binary samples as in P5/P6. Depth 1 or 2 is grey (with alpha), 3 or 4 RGB
// (with alpha); alpha is dropped. (OpenCV's reader swapped R and B here.)
absl::StatusOr<cv::Mat> DecodePam(absl::string_view bytes, int64_t max_pixels) {
  const size_t end = bytes.substr(0, 4096).find("ENDHDR");
  if (end == absl::string_view::npos) return Bad("PAM", "no ENDHDR in the first 4 KiB");
  size_t data = end + 6;
  if (data < bytes.size() && bytes[data] == '\r') ++data;
  if (data >= bytes.size() || bytes[data] != '\n') return Bad("PAM", "ENDHDR is not followed by a newline");
  ++data;
  int64_t width = 0, height = 0, depth = 0, maxval = 0;
  for (absl::string_view line : absl::StrSplit(bytes.substr(3, end - 3), '\n')) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() != 2) continue;
    int64_t value = 0;
    if (!absl::SimpleAtoi(words[1], &value)) continue;
    if (words[0] == "WIDTH") width = value;
    if (words[0] == "HEIGHT") height = value;
    if (words[0] == "DEPTH") depth = value;
    if (words[0] == "MAXVAL") maxval = value;
  }
  if (width < 1 || height < 1 || width > (1 << 20) || height > (1 << 20)) return Bad("PAM", "bad size");
  if (depth < 1 || depth > 4) return Bad("PAM", absl::StrCat("depth ", depth, "; need 1..4"));
  if (maxval < 1 || maxval > 65535) return Bad("PAM", absl::StrCat("maxval ", maxval, "; need 1..65535"));
  if (absl::Status s = CheckPixels("PAM", width, height, max_pixels); !s.ok()) return s;
  const int sample = maxval > 255 ? 2 : 1;
  const uint64_t row_bytes = uint64_t(width) * uint64_t(depth) * sample;
  if ((bytes.size() - data) / row_bytes < uint64_t(height)) return Bad("PAM", "premature end of data");
  cv::Mat rgb(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  const bool colour = depth >= 3;
  for (int y = 0; y < rgb.rows; ++y) {
    const auto* in = reinterpret_cast<const uint8_t*>(bytes.data() + data + row_bytes * static_cast<uint64_t>(y));
    auto* row = rgb.ptr<uint8_t>(y);
    for (int x = 0; x < rgb.cols; ++x) {
      for (int c = 0; c < 3; ++c) row[3 * x + c] = in[(x * depth + (colour ? c : 0)) * sample];
    }
  }
  return rgb;
}

// PBM's binary form (P4), which stb_image does not read: rows of bits, 1 is
// black, each row padded to a byte.
absl::StatusOr<cv::Mat> DecodePbm(absl::string_view bytes, int64_t max_pixels) {
  int64_t size[2];
  absl::StatusOr<size_t> start = ReadPnmNumbers(bytes, 2, size);
  if (!start.ok()) return Bad("PBM", start.status().message());
  const int64_t width = size[0], height = size[1];
  if (absl::Status s = CheckPixels("PBM", width, height, max_pixels); !s.ok()) return s;
  const size_t pos = *start;
  const size_t row_bytes = static_cast<size_t>((width + 7) / 8);
  if (pos > bytes.size() || (bytes.size() - pos) / row_bytes < static_cast<size_t>(height)) {
    return Bad("PBM", "premature end of data");
  }
  cv::Mat rgb(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  for (int y = 0; y < rgb.rows; ++y) {
    const auto* bits = reinterpret_cast<const unsigned char*>(bytes.data() + pos + row_bytes * static_cast<size_t>(y));
    auto* row = rgb.ptr<uint8_t>(y);
    for (int x = 0; x < rgb.cols; ++x) {
      const uint8_t v = ((bits[x / 8] >> (7 - x % 8)) & 1) ? 0 : 255;
      row[3 * x] = row[3 * x + 1] = row[3 * x + 2] = v;
    }
  }
  return rgb;
}

// --- JPEG encoding (libjpeg) ------------------------------------------------------

struct JpegWriteErrors {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = "";
};

void JpegWriteError(j_common_ptr cinfo) {
  auto* errors = reinterpret_cast<JpegWriteErrors*>(cinfo->err);
  cinfo->err->format_message(cinfo, errors->message);
  longjmp(errors->jump, 1);
}

}  // namespace

absl::StatusOr<cv::Mat> DecodeOtherImage(absl::string_view bytes, int64_t max_pixels) {
  if (absl::StartsWith(bytes, "\x89PNG\r\n\x1a\n")) return DecodePng(bytes, max_pixels);
  if (absl::StartsWith(bytes, "RIFF") && bytes.size() >= 12 && bytes.substr(8, 4) == "WEBP")
    return DecodeWebp(bytes, max_pixels);
  if (absl::StartsWith(bytes, absl::string_view("II*\0", 4)) ||
      absl::StartsWith(bytes, absl::string_view("MM\0*", 4)) ||
      absl::StartsWith(bytes, absl::string_view("II+\0", 4)) ||
      absl::StartsWith(bytes, absl::string_view("MM\0+", 4))) {
    return DecodeTiff(bytes, max_pixels);
  }
  if (absl::StartsWith(bytes, "BM")) return DecodeWithStb(bytes, "BMP", max_pixels);
  if (absl::StartsWith(bytes, "P4")) return DecodePbm(bytes, max_pixels);
  if (absl::StartsWith(bytes, "P5") || absl::StartsWith(bytes, "P6")) return DecodePgmPpm(bytes, max_pixels);
  if (absl::StartsWith(bytes, "P1") || absl::StartsWith(bytes, "P2") || absl::StartsWith(bytes, "P3")) {
    return DecodeAsciiPnm(bytes, max_pixels);
  }
  if (absl::StartsWith(bytes, "P7")) return DecodePam(bytes, max_pixels);
  return absl::InvalidArgumentError("not a PNG, WebP, TIFF, BMP or PNM image");
}

absl::StatusOr<std::string> EncodeJpeg(const cv::Mat& rgb, int quality) {
  if (rgb.type() != CV_8UC3 || rgb.empty()) return absl::InvalidArgumentError("JPEG: need a non-empty 8-bit RGB image");
  if (quality < 1 || quality > 100)
    return absl::InvalidArgumentError(absl::StrCat("JPEG quality ", quality, "; need 1..100"));
  const cv::Mat contiguous = rgb.isContinuous() ? rgb : rgb.clone();
  jpeg_compress_struct cinfo;
  JpegWriteErrors errors;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = JpegWriteError;
  unsigned char* out = nullptr;
  unsigned long size = 0;
  if (setjmp(errors.jump)) {
    jpeg_destroy_compress(&cinfo);
    std::free(out);
    return absl::InternalError(absl::StrCat("JPEG encoding: ", errors.message));
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = static_cast<JDIMENSION>(contiguous.cols);
  cinfo.image_height = static_cast<JDIMENSION>(contiguous.rows);
  cinfo.input_components = 3;
  cinfo.in_color_space = JCS_EXT_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row[1] = {const_cast<JSAMPROW>(contiguous.ptr<uint8_t>(static_cast<int>(cinfo.next_scanline)))};
    jpeg_write_scanlines(&cinfo, row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string encoded(reinterpret_cast<const char*>(out), size);
  std::free(out);
  return encoded;
}

absl::StatusOr<std::string> EncodePng(const cv::Mat& rgb) {
  if (rgb.type() != CV_8UC3 || rgb.empty()) return absl::InvalidArgumentError("PNG: need a non-empty 8-bit RGB image");
  std::vector<png_bytep> rows(static_cast<size_t>(rgb.rows));
  for (int y = 0; y < rgb.rows; ++y) rows[static_cast<size_t>(y)] = const_cast<png_bytep>(rgb.ptr<png_byte>(y));
  PngSink sink;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, PngWriteError, PngWarning);
  if (png == nullptr) return absl::ResourceExhaustedError("PNG: cannot create an encoder");
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return absl::InternalError(absl::StrCat("PNG encoding: ", sink.message));
  }
  png_set_write_fn(png, &sink, PngWrite, PngFlush);
  // Tuned for speed, as imencode's defaults are: the Sub filter, zlib level 1, RLE.
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_SUB);
  png_set_compression_level(png, 1);
  png_set_compression_strategy(png, 3 /* Z_RLE */);
  png_set_IHDR(png, info, static_cast<png_uint_32>(rgb.cols), static_cast<png_uint_32>(rgb.rows), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  png_write_image(png, rows.data());
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return std::move(sink.out);
}

}  // namespace stoker
