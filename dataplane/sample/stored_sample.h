// How a materialised dataset stores each sample (see docs/materialize.md):
// the encoding of the pixels the stored prefix produced (raw NumPy .npy
// arrays, re-encoded JPEG or PNG) and an optional per-sample compression
// (zstd or lz4 frames, which the `zstd` and `lz4` tools read). Pure
// functions; thread-safe.
#ifndef STOKER_DATAPLANE_SAMPLE_STORED_SAMPLE_H_
#define STOKER_DATAPLANE_SAMPLE_STORED_SAMPLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stoker {

enum class StoredEncoding { kRaw, kJpeg, kPng };
enum class StoredCompression { kNone, kZstd, kLz4 };

struct StoredFormat {
  StoredEncoding encoding = StoredEncoding::kRaw;
  int jpeg_quality = 90;  // 1..100, kJpeg only
  StoredCompression compression = StoredCompression::kNone;
  int compression_level = 0;  // 0: the library's default

  // The WebDataset field (member name after the key's '.'), e.g. "npy.zst";
  // load-bearing: readers pick the sample's member by it.
  std::string Field() const;
  // "raw", "jpeg:90" or "png"; "none", "zstd" (or "zstd:LEVEL") or "lz4".
  std::string EncodingText() const;
  std::string CompressionText() const;
  // E.g. "raw+zstd", "jpeg:90": names a strategy in logs and reports.
  std::string Name() const;
};

// Parses --format (raw | jpeg:QUALITY | png) and --compression (none | zstd[:LEVEL]
// | lz4). INVALID_ARGUMENT names the value and what is accepted.
absl::StatusOr<StoredFormat> ParseStoredFormat(absl::string_view encoding, absl::string_view compression);

// Encodes an RGB image (prefix output) as stored: .npy (H, W, 3) uint8, or
// JPEG / PNG, then compressed. A float32 image (a prefix ending in normalize)
// is stored as a float32 .npy only; INVALID_ARGUMENT for JPEG or PNG.
absl::StatusOr<std::string> EncodeStoredSample(const cv::Mat& rgb, const StoredFormat& format);

// Undoes the compression. DATA_LOSS names what is wrong with a damaged frame;
// a frame that would expand past `max_bytes` is refused before allocating.
absl::StatusOr<std::string> Decompress(absl::string_view bytes, StoredCompression compression, int64_t max_bytes);

// A NumPy version-1.0 header for a C-order uint8 (or little-endian float32)
// (height, width, 3) array; its size is a multiple of 64 so that the pixels
// are aligned.
std::string NpyHeader(int height, int width, bool float32 = false);
// The RGB image in an uncompressed .npy (uint8 or float32, C order,
// (H, W, 3)): CV_8UC3 or CV_32FC3. The
// image points into `bytes`, which must outlive it. DATA_LOSS for anything
// else (naming what was found); RESOURCE_EXHAUSTED for a size over
// `max_pixels` (0: no limit).
absl::StatusOr<cv::Mat> ParseNpyImage(absl::string_view bytes, int64_t max_pixels);

// Each stored sample's checksum travels beside it as a member KEY.xxh3 of 16
// lower-case hex digits: XXH3-64 of the stored bytes. Load-bearing: the
// member's extension and text are part of the on-disk format
// (docs/materialize.md); datasets made before it have no such members.
inline constexpr char kStoredChecksumField[] = "xxh3";
std::string StoredChecksum(absl::string_view stored_bytes);

// A sample's other members (captions, json, ...; WebDataset fields) travel
// into a materialised dataset as they were, beside the stored pixels, under
// their own extensions. Their checksums are one member KEY.fields.xxh3: a
// line "EXT HASH" per member, in the sample's order, HASH as
// StoredChecksum. Load-bearing (docs/materialize.md).
inline constexpr char kStoredFieldsChecksumField[] = "fields.xxh3";
struct StoredField {
  std::string extension;  // e.g. "txt", "json"
  std::string bytes;
};
std::string StoredFieldsChecksums(const std::vector<StoredField>& fields);
// Whether a source member's extension can be stored beside the pixels: not
// the stored image's, the label's (cls) or a checksum's (xxh3, *.xxh3),
// which the materialised dataset writes itself.
bool IsStorableField(absl::string_view extension, const StoredFormat& format);

// A stored sample with its fields as one string, for the wire between a
// materialising session (SessionConfig.store.fields) and stoker-materialize:
// "STKF1\n", then per part a u32 extension length, the extension, a u64
// length and the bytes (little-endian); the stored image first, with the
// empty extension. Pure functions.
std::string PackStoredRecord(absl::string_view image, const std::vector<StoredField>& fields);
// DATA_LOSS naming what is wrong: no magic, a length past the end, more than
// `max_parts` parts, an image part missing or not first.
absl::Status UnpackStoredRecord(absl::string_view packed, size_t max_parts, std::string* image,
                                std::vector<StoredField>* fields);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SAMPLE_STORED_SAMPLE_H_
