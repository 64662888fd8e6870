// Image dimensions from the header alone, for the formats whose size OpenCV
// would otherwise learn only by decoding: BMP, PNM (PBM/PGM/PPM/PAM) and TIFF.
// Lets --max-pixels be enforced before any pixel buffer exists, whatever the
// format. Pure functions; thread-safe.
#ifndef STOKER_DATAPLANE_DECODE_IMAGE_HEADER_H_
#define STOKER_DATAPLANE_DECODE_IMAGE_HEADER_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"

namespace stoker {

struct HeaderSize {
  int64_t width = 0;
  int64_t height = 0;
};

// The size recorded in a BMP, PNM or TIFF header; nullopt when the bytes are
// none of these or the header is truncated or malformed. Values are as the
// header states them (possibly huge); callers apply their limits.
std::optional<HeaderSize> ReadBmpHeader(absl::string_view bytes);
std::optional<HeaderSize> ReadPnmHeader(absl::string_view bytes);
std::optional<HeaderSize> ReadTiffHeader(absl::string_view bytes);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_IMAGE_HEADER_H_
