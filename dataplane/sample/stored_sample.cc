#include "dataplane/sample/stored_sample.h"

#include <lz4frame.h>
#include <xxhash.h>
#include <zstd.h>

#include <cstring>
#include <memory>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dataplane/decode/image_codecs.h"

namespace stoker {
namespace {

// Load-bearing: the NumPy format's magic and version 1.0.
constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;

absl::StatusOr<int> ParseLevel(absl::string_view text, absl::string_view what, int lo, int hi) {
  int v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < lo || v > hi) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", text, "' is not an integer in ", lo, "..", hi));
  }
  return v;
}

absl::StatusOr<std::string> Compress(std::string plain, const StoredFormat& f) {
  if (f.compression == StoredCompression::kNone) return plain;
  std::string out;
  if (f.compression == StoredCompression::kZstd) {
    out.resize(ZSTD_compressBound(plain.size()));
    const size_t n = ZSTD_compress(out.data(), out.size(), plain.data(), plain.size(),
                                   f.compression_level != 0 ? f.compression_level : ZSTD_CLEVEL_DEFAULT);
    if (ZSTD_isError(n)) return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(n)));
    out.resize(n);
    return out;
  }
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof(prefs));
  prefs.frameInfo.contentSize = plain.size();  // lets readers size the output first
  prefs.compressionLevel = f.compression_level;
  out.resize(LZ4F_compressFrameBound(plain.size(), &prefs));
  const size_t n = LZ4F_compressFrame(out.data(), out.size(), plain.data(), plain.size(), &prefs);
  if (LZ4F_isError(n)) return absl::InternalError(absl::StrCat("lz4: ", LZ4F_getErrorName(n)));
  out.resize(n);
  return out;
}

absl::StatusOr<std::string> DecompressLz4(absl::string_view bytes, int64_t max_bytes) {
  LZ4F_dctx* raw = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION))) {
    return absl::ResourceExhaustedError("lz4: cannot create a decompression context");
  }
  std::unique_ptr<LZ4F_dctx, decltype(&LZ4F_freeDecompressionContext)> ctx(raw, LZ4F_freeDecompressionContext);
  LZ4F_frameInfo_t info;
  size_t consumed = bytes.size();
  size_t hint = LZ4F_getFrameInfo(ctx.get(), &info, bytes.data(), &consumed);
  if (LZ4F_isError(hint)) return absl::DataLossError(absl::StrCat("lz4 frame: ", LZ4F_getErrorName(hint)));
  if (info.contentSize == 0 || static_cast<int64_t>(info.contentSize) > max_bytes) {
    return absl::DataLossError(
        absl::StrCat("lz4 frame declares ", info.contentSize, " bytes of content; expected 1..", max_bytes));
  }
  std::string out(info.contentSize, '\0');
  size_t in_pos = consumed, out_pos = 0;
  while (in_pos < bytes.size() && hint != 0) {
    size_t in_n = bytes.size() - in_pos, out_n = out.size() - out_pos;
    hint = LZ4F_decompress(ctx.get(), out.data() + out_pos, &out_n, bytes.data() + in_pos, &in_n, nullptr);
    if (LZ4F_isError(hint)) return absl::DataLossError(absl::StrCat("lz4 frame: ", LZ4F_getErrorName(hint)));
    in_pos += in_n;
    out_pos += out_n;
    if (in_n == 0 && out_n == 0) break;
  }
  if (hint != 0 || out_pos != out.size()) {
    return absl::DataLossError(absl::StrCat("lz4 frame is truncated: ", out_pos, " of ", out.size(), " bytes"));
  }
  return out;
}

}  // namespace

std::string StoredFormat::Field() const {
  std::string field = encoding == StoredEncoding::kRaw ? "npy" : encoding == StoredEncoding::kJpeg ? "jpg" : "png";
  if (compression == StoredCompression::kZstd) absl::StrAppend(&field, ".zst");
  if (compression == StoredCompression::kLz4) absl::StrAppend(&field, ".lz4");
  return field;
}

std::string StoredFormat::EncodingText() const {
  if (encoding == StoredEncoding::kJpeg) return absl::StrCat("jpeg:", jpeg_quality);
  return encoding == StoredEncoding::kRaw ? "raw" : "png";
}

std::string StoredFormat::CompressionText() const {
  if (compression == StoredCompression::kNone) return "none";
  std::string name = compression == StoredCompression::kZstd ? "zstd" : "lz4";
  if (compression_level != 0) absl::StrAppend(&name, ":", compression_level);
  return name;
}

std::string StoredFormat::Name() const {
  if (compression == StoredCompression::kNone) return EncodingText();
  return absl::StrCat(EncodingText(), "+", CompressionText());
}

absl::StatusOr<StoredFormat> ParseStoredFormat(absl::string_view encoding, absl::string_view compression) {
  StoredFormat f;
  const std::vector<absl::string_view> e = absl::StrSplit(encoding, absl::MaxSplits(':', 1));
  const std::string kind = absl::AsciiStrToLower(e[0]);
  if (kind == "raw" && e.size() == 1) {
    f.encoding = StoredEncoding::kRaw;
  } else if (kind == "png" && e.size() == 1) {
    f.encoding = StoredEncoding::kPng;
  } else if (kind == "jpeg" || kind == "jpg") {
    f.encoding = StoredEncoding::kJpeg;
    if (e.size() == 2) {
      absl::StatusOr<int> q = ParseLevel(e[1], "JPEG quality", 1, 100);
      if (!q.ok()) return q.status();
      f.jpeg_quality = *q;
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("format '", encoding, "' is not one of raw, jpeg:QUALITY (1..100), png"));
  }
  const std::vector<absl::string_view> c = absl::StrSplit(compression, absl::MaxSplits(':', 1));
  const std::string algo = absl::AsciiStrToLower(c[0]);
  if (algo == "none" && c.size() == 1) {
    f.compression = StoredCompression::kNone;
  } else if (algo == "zstd" || algo == "lz4") {
    f.compression = algo == "zstd" ? StoredCompression::kZstd : StoredCompression::kLz4;
    if (c.size() == 2) {
      const int hi = algo == "zstd" ? ZSTD_maxCLevel() : 12;
      absl::StatusOr<int> level = ParseLevel(c[1], absl::StrCat(algo, " level"), 1, hi);
      if (!level.ok()) return level.status();
      f.compression_level = *level;
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("compression '", compression, "' is not one of none, zstd[:LEVEL], lz4[:LEVEL]"));
  }
  return f;
}

std::string NpyHeader(int height, int width, bool float32) {
  std::string dict = absl::StrCat("{'descr': '", float32 ? "<f4" : "|u1", "', 'fortran_order': False, 'shape': (",
                                  height, ", ", width, ", 3), }");
  // magic (6) + version (2) + length (2) + dict + padding + '\n' = k x 64.
  const size_t unpadded = kNpyMagicLen + 4 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string header(kNpyMagic, kNpyMagicLen);
  header.push_back(1);
  header.push_back(0);
  header.push_back(static_cast<char>(dict.size() & 0xff));
  header.push_back(static_cast<char>(dict.size() >> 8));
  return header + dict;
}

namespace {

// The .npy header's dict as numpy writes it (a Python literal):
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 3), } then spaces
// and a newline. Each of the three keys once, no other key, nothing after the
// closing brace but whitespace: anything else is refused, so that no header
// is read in two ways (a second 'descr', a missing comma).
struct NpyDict {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

class NpyDictParser {
 public:
  explicit NpyDictParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<NpyDict> Parse() {
    NpyDict d;
    bool have_descr = false, have_order = false, have_shape = false;
    if (!Take('{')) return Error("does not start with '{'");
    while (true) {
      if (Take('}')) break;
      absl::StatusOr<std::string> key = Quoted();
      if (!key.ok()) return key.status();
      if (!Take(':')) return Error(absl::StrCat("has no ':' after '", *key, "'"));
      if (*key == "descr" && !have_descr) {
        absl::StatusOr<std::string> v = Quoted();
        if (!v.ok()) return v.status();
        d.descr = *std::move(v);
        have_descr = true;
      } else if (*key == "fortran_order" && !have_order) {
        if (Word("False")) {
          d.fortran_order = false;
        } else if (Word("True")) {
          d.fortran_order = true;
        } else {
          return Error("has a fortran_order that is neither True nor False");
        }
        have_order = true;
      } else if (*key == "shape" && !have_shape) {
        absl::StatusOr<std::vector<int64_t>> v = Shape();
        if (!v.ok()) return v.status();
        d.shape = *std::move(v);
        have_shape = true;
      } else {
        return Error(absl::StrCat("has '", *key, "' twice or a key other than descr, fortran_order and shape"));
      }
      if (Take('}')) break;
      if (!Take(',')) return Error(absl::StrCat("has no ',' after '", *key, "'"));
    }
    SkipSpace();
    if (at_ != text_.size()) return Error("has bytes after its closing '}'");
    if (!have_descr || !have_order || !have_shape) return Error("lacks descr, fortran_order or shape");
    return d;
  }

 private:
  absl::Status Error(absl::string_view what) const {
    const absl::string_view shown = absl::StripAsciiWhitespace(text_);
    return absl::DataLossError(
        absl::StrCat(".npy header ", what, ": ", shown.substr(0, 200), shown.size() > 200 ? "..." : ""));
  }
  void SkipSpace() {
    while (at_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool Take(char c) {
    SkipSpace();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  bool Word(absl::string_view w) {
    SkipSpace();
    if (!absl::StartsWith(text_.substr(at_), w)) return false;
    at_ += w.size();
    return true;
  }
  absl::StatusOr<std::string> Quoted() {
    if (!Take('\'')) return Error("has a key or value that is not a quoted string");
    const size_t end = text_.find('\'', at_);
    if (end == absl::string_view::npos) return Error("has an unterminated string");
    std::string s(text_.substr(at_, end - at_));
    at_ = end + 1;
    return s;
  }
  absl::StatusOr<std::vector<int64_t>> Shape() {
    std::vector<int64_t> shape;
    if (!Take('(')) return Error("has a shape that is not a tuple");
    while (!Take(')')) {
      SkipSpace();
      size_t end = at_;
      while (end < text_.size() && absl::ascii_isdigit(static_cast<unsigned char>(text_[end]))) ++end;
      int64_t v = 0;
      if (end == at_ || end - at_ > 8 || !absl::SimpleAtoi(text_.substr(at_, end - at_), &v) || v < 1 ||
          v > (int64_t{1} << 20)) {
        return Error("has a shape that is not positive sizes");
      }
      at_ = end;
      shape.push_back(v);
      if (!Take(',') && !(SkipSpace(), at_ < text_.size() && text_[at_] == ')')) {
        return Error("has a shape whose sizes are not separated by ','");
      }
    }
    return shape;
  }

  const absl::string_view text_;
  size_t at_ = 0;
};

}  // namespace

absl::StatusOr<cv::Mat> ParseNpyImage(absl::string_view bytes, int64_t max_pixels) {
  if (bytes.size() < kNpyMagicLen + 4 || bytes.substr(0, kNpyMagicLen) != absl::string_view(kNpyMagic, kNpyMagicLen)) {
    return absl::DataLossError(absl::StrCat("not a .npy array (", bytes.size(), " bytes without the NumPy magic)"));
  }
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  const int major = byte(6);
  size_t dict_at = 10, dict_len = byte(8) | (size_t{byte(9)} << 8);
  if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::DataLossError(".npy header is truncated");
    dict_at = 12;
    dict_len = byte(8) | (size_t{byte(9)} << 8) | (size_t{byte(10)} << 16) | (size_t{byte(11)} << 24);
  } else if (major != 1) {
    return absl::DataLossError(absl::StrCat(".npy format version ", major, " is not 1, 2 or 3"));
  }
  if (dict_len > bytes.size() - dict_at) return absl::DataLossError(".npy header is longer than the member");
  const absl::string_view dict = bytes.substr(dict_at, dict_len);
  absl::StatusOr<NpyDict> header = NpyDictParser(dict).Parse();
  if (!header.ok()) return header.status();
  const bool float32 = header->descr == "<f4";
  if (!float32 && header->descr != "|u1" && header->descr != "<u1") {
    return absl::DataLossError(
        absl::StrCat(".npy array is neither uint8 nor little-endian float32: ", absl::StripAsciiWhitespace(dict)));
  }
  if (header->fortran_order) return absl::DataLossError(".npy array is in Fortran order; expected C order");
  const std::vector<int64_t>& shape = header->shape;
  const std::string shape_text = absl::StrJoin(shape, ", ");
  if (shape.size() != 3 || shape[2] != 3) {
    return absl::DataLossError(absl::StrCat(".npy shape (", shape_text, ") is not (height, width, 3)"));
  }
  if (max_pixels > 0 && shape[0] * shape[1] > max_pixels) {
    return absl::ResourceExhaustedError(
        absl::StrCat(".npy image ", shape[1], "x", shape[0], " exceeds --max-pixels ", max_pixels));
  }
  const size_t data_at = dict_at + dict_len;
  const int64_t need = shape[0] * shape[1] * 3 * (float32 ? 4 : 1);
  if (static_cast<int64_t>(bytes.size() - data_at) != need) {
    return absl::DataLossError(absl::StrCat(".npy array (", shape[0], ", ", shape[1], ", 3) needs ", need,
                                            " bytes of data; the member has ", bytes.size() - data_at));
  }
  return cv::Mat(static_cast<int>(shape[0]), static_cast<int>(shape[1]), float32 ? CV_32FC3 : CV_8UC3,
                 const_cast<char*>(bytes.data() + data_at));
}

absl::StatusOr<std::string> EncodeStoredSample(const cv::Mat& rgb, const StoredFormat& format) {
  const bool float32 = rgb.type() == CV_32FC3;
  if ((rgb.type() != CV_8UC3 && !float32) || rgb.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stored samples are 8-bit or float32 RGB; got OpenCV type ", rgb.type()));
  }
  if (float32 && format.encoding != StoredEncoding::kRaw) {
    return absl::InvalidArgumentError(
        absl::StrCat("float pixels (a prefix ending in normalize) are stored raw only, "
                     "not as ",
                     format.EncodingText()));
  }
  std::string plain;
  if (format.encoding == StoredEncoding::kRaw) {
    plain = NpyHeader(rgb.rows, rgb.cols, float32);
    const size_t row = size_t(rgb.cols) * 3 * rgb.elemSize1();
    plain.reserve(plain.size() + row * rgb.rows);
    for (int y = 0; y < rgb.rows; ++y) plain.append(reinterpret_cast<const char*>(rgb.ptr(y)), row);
  } else {
    absl::StatusOr<std::string> encoded =
        format.encoding == StoredEncoding::kJpeg ? EncodeJpeg(rgb, format.jpeg_quality) : EncodePng(rgb);
    if (!encoded.ok()) return encoded.status();
    plain = *std::move(encoded);
  }
  return Compress(std::move(plain), format);
}

absl::StatusOr<std::string> Decompress(absl::string_view bytes, StoredCompression compression, int64_t max_bytes) {
  switch (compression) {
    case StoredCompression::kNone: return std::string(bytes);
    case StoredCompression::kLz4: return DecompressLz4(bytes, max_bytes);
    case StoredCompression::kZstd: break;
  }
  const unsigned long long size = ZSTD_getFrameContentSize(bytes.data(), bytes.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return absl::DataLossError("zstd frame is damaged or does not declare its content size");
  }
  if (size == 0 || size > static_cast<unsigned long long>(max_bytes)) {
    return absl::DataLossError(
        absl::StrCat("zstd frame declares ", size, " bytes of content; expected 1..", max_bytes));
  }
  std::string out(size, '\0');
  const size_t n = ZSTD_decompress(out.data(), out.size(), bytes.data(), bytes.size());
  if (ZSTD_isError(n)) return absl::DataLossError(absl::StrCat("zstd frame: ", ZSTD_getErrorName(n)));
  if (n != out.size()) return absl::DataLossError(absl::StrCat("zstd frame gave ", n, " of ", size, " bytes"));
  return out;
}

std::string StoredChecksum(absl::string_view stored_bytes) {
  return absl::StrFormat("%016x", XXH3_64bits(stored_bytes.data(), stored_bytes.size()));
}

std::string StoredFieldsChecksums(const std::vector<StoredField>& fields) {
  std::string text;
  for (const StoredField& f : fields) absl::StrAppend(&text, f.extension, " ", StoredChecksum(f.bytes), "\n");
  return text;
}

bool IsStorableField(absl::string_view extension, const StoredFormat& format) {
  return !extension.empty() && extension != format.Field() && extension != "cls" && extension != kStoredChecksumField &&
         !absl::EndsWith(extension, ".xxh3");
}

namespace {

constexpr absl::string_view kRecordMagic = "STKF1\n";

void AppendLE(std::string* out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

bool TakeLE(absl::string_view* in, int bytes, uint64_t* value) {
  if (in->size() < static_cast<size_t>(bytes)) return false;
  *value = 0;
  for (int i = 0; i < bytes; ++i) *value |= uint64_t{static_cast<unsigned char>((*in)[i])} << (8 * i);
  in->remove_prefix(static_cast<size_t>(bytes));
  return true;
}

void AppendPart(std::string* out, absl::string_view extension, absl::string_view bytes) {
  AppendLE(out, extension.size(), 4);
  out->append(extension.data(), extension.size());
  AppendLE(out, bytes.size(), 8);
  out->append(bytes.data(), bytes.size());
}

}  // namespace

std::string PackStoredRecord(absl::string_view image, const std::vector<StoredField>& fields) {
  size_t total = kRecordMagic.size() + 12 + image.size();
  for (const StoredField& f : fields) total += 12 + f.extension.size() + f.bytes.size();
  std::string out;
  out.reserve(total);
  out.append(kRecordMagic.data(), kRecordMagic.size());
  AppendPart(&out, "", image);
  for (const StoredField& f : fields) AppendPart(&out, f.extension, f.bytes);
  return out;
}

absl::Status UnpackStoredRecord(absl::string_view packed, size_t max_parts, std::string* image,
                                std::vector<StoredField>* fields) {
  if (!absl::StartsWith(packed, kRecordMagic)) {
    return absl::DataLossError(
        "a stored record without its header: the server sent a bare sample (a server older "
        "than this tool, which does not send fields?)");
  }
  packed.remove_prefix(kRecordMagic.size());
  fields->clear();
  bool first = true;
  while (!packed.empty()) {
    if (fields->size() + 1 > max_parts) {
      return absl::DataLossError(absl::StrCat("a stored record of more than ", max_parts, " parts"));
    }
    uint64_t name_size = 0, size = 0;
    if (!TakeLE(&packed, 4, &name_size) || name_size > packed.size()) {
      return absl::DataLossError("a stored record's part name runs past its end");
    }
    const absl::string_view name = packed.substr(0, static_cast<size_t>(name_size));
    packed.remove_prefix(static_cast<size_t>(name_size));
    if (!TakeLE(&packed, 8, &size) || size > packed.size()) {
      return absl::DataLossError(
          absl::StrCat("a stored record's part '", absl::CHexEscape(name.substr(0, 64)), "' runs past its end"));
    }
    const absl::string_view bytes = packed.substr(0, static_cast<size_t>(size));
    packed.remove_prefix(static_cast<size_t>(size));
    if (first != name.empty()) {
      return absl::DataLossError(first ? "a stored record that does not begin with its image"
                                       : "a stored record with a second image or a field without a name");
    }
    if (first) {
      image->assign(bytes.data(), bytes.size());
      first = false;
    } else {
      fields->push_back({std::string(name), std::string(bytes)});
    }
  }
  if (first) return absl::DataLossError("a stored record without its image");
  return absl::OkStatus();
}

}  // namespace stoker
