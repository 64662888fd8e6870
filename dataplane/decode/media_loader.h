// Loads libstoker_media.so (media_module.cc, FFmpeg behind media_abi.h) on
// first use with dlopen: from $STOKER_MEDIA_MODULE, beside the library or
// binary holding this code, or where the build put it. A process that never
// decodes audio or video never loads FFmpeg. Thread-safe.
#ifndef STOKER_DATAPLANE_DECODE_MEDIA_LOADER_H_
#define STOKER_DATAPLANE_DECODE_MEDIA_LOADER_H_

#include <string>

#include "absl/status/status.h"

#include "dataplane/decode/media_abi.h"

namespace stoker {

struct MediaApi {
  decltype(&stoker_media_decode_audio_kept) decode_audio = nullptr;
  decltype(&stoker_media_video_index) video_index = nullptr;
  decltype(&stoker_media_video_frames) video_frames = nullptr;
  decltype(&stoker_media_video_frames_each) video_frames_each = nullptr;
  decltype(&stoker_media_free) free = nullptr;
  decltype(&stoker_media_version) version = nullptr;
};

// The module's functions, or null with *error saying where it was looked
// for and why each try failed.
const MediaApi* LoadMediaModule(std::string* error);

// A module call's result as a Status: decode failures (image_decoder.h)
// carrying `error`, RESOURCE_EXHAUSTED for memory ("out of memory while
// <what>: ..."), OK for STOKER_MEDIA_OK.
absl::Status MediaStatus(int result, const char* error, const char* what);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_MEDIA_LOADER_H_
