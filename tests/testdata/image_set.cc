#include "tests/testdata/image_set.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <jpeglib.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include "absl/strings/str_format.h"
#include "common/rng.h"

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
      const cv::Point q(static_cast<int>(rng.UniformInt(0, width - 1)),
                        static_cast<int>(rng.UniformInt(0, height - 1)));
      cv::rectangle(img, p, q, color, cv::FILLED);
    }
  }
  cv::Mat grain(height, width, CV_8UC3);
  cv::theRNG().state = seed;  // keep cv::randn deterministic too
  cv::randn(grain, cv::Scalar::all(128), cv::Scalar::all(8));
  cv::addWeighted(img, 1.0, grain, 1.0, -128, img);
  return img;
}

std::string EncodeJpeg(const cv::Mat& rgb, int quality, bool progressive) {
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  std::vector<uint8_t> buf;
  cv::imencode(".jpg", bgr, buf,
               {cv::IMWRITE_JPEG_QUALITY, quality, cv::IMWRITE_JPEG_PROGRESSIVE, progressive ? 1 : 0});
  return std::string(buf.begin(), buf.end());
}

std::string EncodeCmykJpeg(const cv::Mat& cmyk, int quality) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &out, &size);
  cinfo.image_width = static_cast<JDIMENSION>(cmyk.cols);
  cinfo.image_height = static_cast<JDIMENSION>(cmyk.rows);
  cinfo.input_components = 4;
  cinfo.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  jpeg_start_compress(&cinfo, TRUE);  // writes an Adobe marker for CMYK
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(cmyk.ptr<uint8_t>(static_cast<int>(cinfo.next_scanline)));
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  std::string bytes(reinterpret_cast<char*>(out), size);
  jpeg_destroy_compress(&cinfo);
  free(out);
  return bytes;
}

namespace {
void AppendChunk(std::string& png, const char* type, const std::string& data) {
  const uint32_t len = static_cast<uint32_t>(data.size());
  for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<char>((len >> s) & 0xff));
  std::string body = std::string(type, 4) + data;
  png += body;
  const uint32_t crc =
      static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));
  for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<char>((crc >> s) & 0xff));
}
}  // namespace

std::string EncodePalettePng(const cv::Mat& indices, const std::vector<cv::Vec3b>& palette) {
  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  for (uint32_t v : {static_cast<uint32_t>(indices.cols), static_cast<uint32_t>(indices.rows)}) {
    for (int s = 24; s >= 0; s -= 8) ihdr.push_back(static_cast<char>((v >> s) & 0xff));
  }
  ihdr += std::string("\x08\x03\x00\x00\x00", 5);  // 8-bit, palette, deflate, no filter, no interlace
  AppendChunk(png, "IHDR", ihdr);
  std::string plte;
  for (const cv::Vec3b& c : palette)
    plte += std::string{static_cast<char>(c[0]), static_cast<char>(c[1]), static_cast<char>(c[2])};
  AppendChunk(png, "PLTE", plte);
  std::string raw;
  for (int y = 0; y < indices.rows; ++y) {
    raw.push_back('\0');  // filter: none
    raw.append(reinterpret_cast<const char*>(indices.ptr<uint8_t>(y)), static_cast<size_t>(indices.cols));
  }
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string z(size, '\0');
  compress(reinterpret_cast<Bytef*>(z.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
           static_cast<uLong>(raw.size()));
  z.resize(size);
  AppendChunk(png, "IDAT", z);
  AppendChunk(png, "IEND", "");
  return png;
}

std::string EncodeWithOpenCv(const cv::Mat& rgb, const std::string& ext) {
  cv::Mat bgr;
  if (rgb.channels() == 4) {
    cv::cvtColor(rgb, bgr, cv::COLOR_RGBA2BGRA);
  } else {
    cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  }
  std::vector<uint8_t> buf;
  cv::imencode(ext, bgr, buf);
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
