// A materialised dataset's untrusted bytes: the first byte picks the reader
// (a .npy array, a zstd or lz4 frame, a manifest; 0xF0: a stored record as a
// server sends it to stoker-materialize), the rest is its input.
// Each must give an image, bytes or an error, within its limits, never a crash.
#include <cstdint>
#include <string>

#include "dataplane/sample/stored_sample.h"
#include "dataplane/sources/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  constexpr int64_t kMaxBytes = 1 << 20;
  if (data[0] == 0xF0) {  // a record that unpacks is the one packing its parts gives
    std::string image;
    std::vector<stoker::StoredField> fields;
    if (stoker::UnpackStoredRecord(input, 8, &image, &fields).ok() &&
        (fields.size() > 7 || stoker::PackStoredRecord(image, fields) != input)) {
      __builtin_trap();
    }
    return 0;
  }
  switch (data[0] % 4) {
    case 0: {
      absl::StatusOr<cv::Mat> image = stoker::ParseNpyImage(input, 1 << 16);
      // uint8 or float32 RGB, its pixels inside the input after a header.
      if (image.ok() && !((image->type() == CV_8UC3 && image->total() * 3 + 10 <= input.size()) ||
                          (image->type() == CV_32FC3 && image->total() * 12 + 10 <= input.size()))) {
        __builtin_trap();
      }
      break;
    }
    case 1:
    case 2: {
      const auto c = data[0] % 4 == 1 ? stoker::StoredCompression::kZstd : stoker::StoredCompression::kLz4;
      absl::StatusOr<std::string> plain = stoker::Decompress(input, c, kMaxBytes);
      if (plain.ok() && static_cast<int64_t>(plain->size()) > kMaxBytes) __builtin_trap();
      break;
    }
    default: {
      absl::StatusOr<stoker::Manifest> m = stoker::ParseManifest(input);
      if (m.ok()) (void)stoker::ParseManifest(m->ToJson());
      break;
    }
  }
  return 0;
}
