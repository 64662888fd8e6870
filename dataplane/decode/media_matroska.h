// Matroska/WebM attachments (fonts, cover art, any file) are read whole by
// FFmpeg's demuxer when it opens the container, and copied again into the
// attachment stream's extradata: a 200 MB attachment cost 837 MB per worker
// for a sample that only wants the video. The module hides them instead:
// each Attachments element is presented to the demuxer as an EBML Void
// element of the same length, which it skips without reading. Pure
// functions; thread-safe. Part of libstoker_media.so (no FFmpeg here).
#ifndef STOKER_DATAPLANE_DECODE_MEDIA_MATROSKA_H_
#define STOKER_DATAPLANE_DECODE_MEDIA_MATROSKA_H_

#include <cstdint>
#include <string>
#include <vector>

namespace stoker_media {

// Bytes that replace the file's at `offset` when the demuxer reads them.
struct InputPatch {
  int64_t offset = 0;
  std::string bytes;
};

// The patches that turn each Attachments element of the Matroska file in
// data[0, size) into a Void element of the same length: those among the
// Segment's top-level elements (walked by their sizes up to the first of
// unknown size) and those its SeekHead points to (an index at the end of
// the file). Empty for a file that is not Matroska or has no attachments.
// Bounded: at most 100,000 elements are looked at.
std::vector<InputPatch> HideMatroskaAttachments(const uint8_t* data, int64_t size);

}  // namespace stoker_media

#endif  // STOKER_DATAPLANE_DECODE_MEDIA_MATROSKA_H_
