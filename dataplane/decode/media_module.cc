// libstoker_media.so: FFmpeg's demuxers, decoders, resampler and scaler
// behind the C interface of media_abi.h. Audio is media_audio.cc, video
// media_video.cc; this file holds what both share. Input is a sample's bytes
// in memory (a custom AVIOContext), never a path or a URL: only the demuxers
// in media_internal.h are allowed, and every loop is bounded (duration,
// packets without output, wall time), so that a hostile file fails its
// sample instead of hanging a worker.
#include <cstdlib>
#include <string>

#include "dataplane/decode/media_abi.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswresample/swresample.h>
}

extern "C" {

__attribute__((visibility("default"))) void stoker_media_free(void* p) { std::free(p); }

__attribute__((visibility("default"))) const char* stoker_media_version(void) {
  static const std::string version = std::string("libavformat ") + AV_STRINGIFY(LIBAVFORMAT_VERSION) + ", libavcodec " +
                                     AV_STRINGIFY(LIBAVCODEC_VERSION) + ", libswresample " +
                                     AV_STRINGIFY(LIBSWRESAMPLE_VERSION);
  return version.c_str();
}

}  // extern "C"
