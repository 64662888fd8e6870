// Internal to libstoker_media.so: what media_module.cc (audio) and
// media_video.cc (video) share: failures, the in-memory input and the
// container opened over it, and FFmpeg's deleters.
#ifndef STOKER_DATAPLANE_DECODE_MEDIA_INTERNAL_H_
#define STOKER_DATAPLANE_DECODE_MEDIA_INTERNAL_H_

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/decode/media_abi.h"
#include "dataplane/decode/media_matroska.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/mem.h>
#include <libavutil/time.h>
#include <libswresample/swresample.h>
}

namespace stoker_media {

// Containers a sample may be: audio files and video containers (mov is
// mp4/m4a, matroska is webm too).
inline constexpr const char* kDemuxers = "wav,w64,flac,mp3,ogg,mov,matroska,avi,aac,aiff,caf";
inline constexpr int kIoBufferBytes = 64 << 10;
inline constexpr int kMaxChannels = 64;
inline constexpr int kMinRate = 1000;  // an input rate below this is no real audio (and upsampling it is huge)
inline constexpr int kMaxRate = 768000;
// A stream that yields nothing for this many packets in a row is not audio
// that will ever decode (a container that demuxes forever).
inline constexpr int kMaxIdlePackets = 20000;

struct Failure {
  int code = STOKER_MEDIA_OK;
  std::string message;
};

inline Failure Fail(int code, const char* format, ...) __attribute__((format(printf, 2, 3)));
inline Failure Fail(int code, const char* format, ...) {
  char buffer[400];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return {code, buffer};
}

inline std::string AvError(int err) {
  char buffer[AV_ERROR_MAX_STRING_SIZE] = "";
  av_strerror(err, buffer, sizeof(buffer));
  return buffer;
}

struct MemoryInput {
  const uint8_t* data;
  int64_t size;
  int64_t pos = 0;
  int64_t deadline_us = 0;          // av_gettime_relative() past which the demuxer is interrupted; 0: none
  std::vector<InputPatch> patches;  // bytes the demuxer sees instead of the file's (media_matroska.h)
};

inline int ReadInput(void* opaque, uint8_t* buf, int buf_size) {
  auto* in = static_cast<MemoryInput*>(opaque);
  const int64_t n = std::min<int64_t>(buf_size, in->size - in->pos);
  if (n <= 0) return AVERROR_EOF;
  std::memcpy(buf, in->data + in->pos, static_cast<size_t>(n));
  for (const InputPatch& p : in->patches) {
    const int64_t from = std::max(in->pos, p.offset),
                  to = std::min(in->pos + n, p.offset + static_cast<int64_t>(p.bytes.size()));
    if (from < to)
      std::memcpy(buf + (from - in->pos), p.bytes.data() + (from - p.offset), static_cast<size_t>(to - from));
  }
  in->pos += n;
  return static_cast<int>(n);
}

inline int64_t SeekInput(void* opaque, int64_t offset, int whence) {
  auto* in = static_cast<MemoryInput*>(opaque);
  if (whence & AVSEEK_SIZE) return in->size;
  whence &= ~AVSEEK_FORCE;
  const int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? in->pos : whence == SEEK_END ? in->size : -1;
  if (base < 0 || offset > in->size || base + offset < 0 || base + offset > in->size) return AVERROR(EINVAL);
  in->pos = base + offset;
  return in->pos;
}

inline int Interrupted(void* opaque) {
  const auto* in = static_cast<const MemoryInput*>(opaque);
  return in->deadline_us > 0 && av_gettime_relative() > in->deadline_us;
}

// An opened container over memory; closes everything it opened.
struct Container {
  MemoryInput input;
  AVIOContext* io = nullptr;
  AVFormatContext* format = nullptr;

  ~Container() {
    if (format != nullptr) avformat_close_input(&format);
    if (io != nullptr) {
      av_freep(&io->buffer);
      avio_context_free(&io);
    }
  }

  // `max_pixels` > 0 bounds the frames the probe may decode (a header
  // announcing 100,000 x 100,000 fails there, before any frame is made).
  Failure Open(double max_wall_seconds, int64_t max_pixels = 0) {
    if (max_wall_seconds > 0) input.deadline_us = av_gettime_relative() + static_cast<int64_t>(max_wall_seconds * 1e6);
    input.patches = HideMatroskaAttachments(input.data, input.size);  // never read: no sample needs them
    auto* buffer = static_cast<uint8_t*>(av_malloc(kIoBufferBytes));
    if (buffer == nullptr) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate the demuxer's buffer");
    io = avio_alloc_context(buffer, kIoBufferBytes, 0, &input, ReadInput, nullptr, SeekInput);
    if (io == nullptr) {
      av_free(buffer);
      return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate the demuxer's input");
    }
    format = avformat_alloc_context();
    if (format == nullptr) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate the demuxer");
    format->pb = io;
    format->flags |= AVFMT_FLAG_CUSTOM_IO;
    format->format_whitelist = av_strdup(kDemuxers);
    format->interrupt_callback = {Interrupted, &input};
    int err = avformat_open_input(&format, nullptr, nullptr, nullptr);  // frees `format` on failure
    if (err < 0) {
      if (err == AVERROR_EXIT)
        return Fail(STOKER_MEDIA_CORRUPT, "opening the container took longer than %.0f s", max_wall_seconds);
      return Fail(STOKER_MEDIA_CORRUPT, "not a container this server reads (%s: %s)", kDemuxers, AvError(err).c_str());
    }
    std::vector<AVDictionary*> options(format->nb_streams, nullptr);
    if (max_pixels > 0) {
      for (AVDictionary*& o : options) av_dict_set_int(&o, "max_pixels", max_pixels, 0);
    }
    err = avformat_find_stream_info(format, options.empty() ? nullptr : options.data());
    for (AVDictionary*& o : options) av_dict_free(&o);
    if (err < 0) return Fail(STOKER_MEDIA_CORRUPT, "the container's streams cannot be read: %s", AvError(err).c_str());
    return {};
  }
};

struct CodecDeleter {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct PacketDeleter {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct FrameDeleter {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct SwrDeleter {
  void operator()(SwrContext* s) const { swr_free(&s); }
};

// FFmpeg's log callback is one per process. Another user of the same
// libraries here (PyAV in a training process running local mode) may have
// installed one that takes its own locks (PyAV's takes the GIL, which the
// thread waiting for this batch may hold): every decode puts back a callback
// that does nothing, so a worker never waits on another library's lock, and
// a bad sample is reported once, by its sample, not by FFmpeg's log.
inline void DropLog(void*, int, const char*, va_list) {}

// The largest block FFmpeg may allocate in this process (av_max_alloc, a
// process-wide setting, INT_MAX by default): a hostile header's stated size
// fails as out of memory instead of taking gigabytes. 512 MiB holds a
// 10,000 x 10,000 RGB frame (the default --max-pixels).
inline constexpr size_t kMaxFfmpegBlock = size_t{512} << 20;

// Each entry point's first step: the log callback above and the block limit.
inline void PrepareFfmpeg() {
  av_log_set_level(AV_LOG_QUIET);
  av_log_set_callback(DropLog);
  av_max_alloc(kMaxFfmpegBlock);
}

inline void CopyMessage(const std::string& message, char* error, size_t error_size) {
  if (error == nullptr || error_size == 0) return;
  const size_t n = std::min(message.size(), error_size - 1);
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

}  // namespace stoker_media

#endif  // STOKER_DATAPLANE_DECODE_MEDIA_INTERNAL_H_
