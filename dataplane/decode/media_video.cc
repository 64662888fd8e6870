// libstoker_media.so, video: the index of a video stream's frames (a demux of
// the whole file, no decoding) and the decode of chosen frames by their
// presentation timestamps, from the keyframe before the first of them.
// Bounded as the audio path is (media_module.cc): the frame size, the frame
// count and the duration are checked from the header and again as found.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "dataplane/decode/media_internal.h"

extern "C" {
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

namespace stoker_media {
namespace {

struct SwsDeleter {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

// The container's first video stream, opened and checked against the limits.
struct VideoStream {
  Container box;
  int index = -1;
  const AVCodec* codec = nullptr;
  AVStream* stream = nullptr;

  Failure Open(const uint8_t* data, size_t size, const StokerVideoLimits& limits) {
    if (size == 0) return Fail(STOKER_MEDIA_EMPTY, "zero bytes");
    box.input.data = data;
    box.input.size = static_cast<int64_t>(size);
    if (Failure f = box.Open(limits.max_wall_seconds, limits.max_pixels); f.code != STOKER_MEDIA_OK) {
      // The probe refuses frames over max_pixels: say so rather than "cannot be read".
      return f;
    }
    AVFormatContext* format = box.format;
    index = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (index == AVERROR_STREAM_NOT_FOUND) {
      return Fail(STOKER_MEDIA_UNSUPPORTED, "the %s container has no video stream", format->iformat->name);
    }
    if (index == AVERROR_DECODER_NOT_FOUND || (index >= 0 && codec == nullptr)) {
      const AVCodecDescriptor* d = avcodec_descriptor_get(format->streams[std::max(index, 0)]->codecpar->codec_id);
      return Fail(STOKER_MEDIA_UNSUPPORTED, "the video stream's codec (%s) is not one this server's FFmpeg decodes",
                  d != nullptr ? d->name : "unknown");
    }
    if (index < 0) return Fail(STOKER_MEDIA_CORRUPT, "no video stream could be chosen: %s", AvError(index).c_str());
    stream = format->streams[index];
    for (unsigned i = 0; i < format->nb_streams; ++i) {
      if (static_cast<int>(i) != index) format->streams[i]->discard = AVDISCARD_ALL;
    }
    const AVCodecParameters* par = stream->codecpar;
    if ((par->width < 1 || par->height < 1) && limits.max_pixels > 0) {
      // The probe decodes no frame over the limit, and then knows no size.
      return Fail(STOKER_MEDIA_TOO_LARGE,
                  "no frame of the video stream decodes within --max-pixels (%lld): its "
                  "frames are larger, or its header is corrupt",
                  static_cast<long long>(limits.max_pixels));
    }
    if (par->width < 1 || par->height < 1) {
      return Fail(STOKER_MEDIA_CORRUPT, "the video stream states %dx%d pixels", par->width, par->height);
    }
    if (limits.max_pixels > 0 && int64_t{par->width} * par->height > limits.max_pixels) {
      return Fail(STOKER_MEDIA_TOO_LARGE, "frames of %dx%d pixels; --max-pixels is %lld", par->width, par->height,
                  static_cast<long long>(limits.max_pixels));
    }
    if (limits.max_frames > 0 && stream->nb_frames > limits.max_frames) {
      return Fail(STOKER_MEDIA_TOO_LARGE,
                  "the video stream announces %lld frames; at most %lld are read "
                  "(--max-video-frames)",
                  static_cast<long long>(stream->nb_frames), static_cast<long long>(limits.max_frames));
    }
    double announced = 0;
    if (stream->duration > 0) {
      announced = static_cast<double>(stream->duration) * av_q2d(stream->time_base);
    } else if (format->duration > 0) {
      announced = static_cast<double>(format->duration) / AV_TIME_BASE;
    }
    if (limits.max_seconds > 0 && announced > limits.max_seconds) {
      return Fail(STOKER_MEDIA_TOO_LARGE,
                  "the video stream announces %.1f s; at most %.1f s are read "
                  "(--max-media-seconds)",
                  announced, limits.max_seconds);
    }
    return {};
  }
};

Failure Index(const uint8_t* data, size_t size, const StokerVideoLimits& limits, int* width, int* height,
              std::vector<int64_t>* pts, double* seconds_per_tick) {
  VideoStream v;
  if (Failure f = v.Open(data, size, limits); f.code != STOKER_MEDIA_OK) return f;
  std::unique_ptr<AVPacket, PacketDeleter> packet(av_packet_alloc());
  if (!packet) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate a packet");
  while (true) {
    const int err = av_read_frame(v.box.format, packet.get());
    if (err == AVERROR_EOF) break;
    if (err == AVERROR_EXIT)
      return Fail(STOKER_MEDIA_TIMEOUT, "indexing took longer than %.0f s", limits.max_wall_seconds);
    if (err < 0) {
      if (v.box.input.pos >= v.box.input.size && !pts->empty()) break;  // a cut last packet: the frames before it stand
      return Fail(STOKER_MEDIA_CORRUPT, "the container does not demux: %s", AvError(err).c_str());
    }
    if (packet->stream_index == v.index && !(packet->flags & AV_PKT_FLAG_DISCARD)) {
      // (Packets an edit list cuts are decoded but never output: not frames.)
      const int64_t ts = packet->pts != AV_NOPTS_VALUE ? packet->pts : packet->dts;
      if (ts == AV_NOPTS_VALUE) {
        av_packet_unref(packet.get());
        return Fail(STOKER_MEDIA_CORRUPT, "a video packet without a timestamp");
      }
      pts->push_back(ts);
      if (limits.max_frames > 0 && static_cast<int64_t>(pts->size()) > limits.max_frames) {
        av_packet_unref(packet.get());
        return Fail(STOKER_MEDIA_TOO_LARGE, "the video stream has more than %lld frames (--max-video-frames)",
                    static_cast<long long>(limits.max_frames));
      }
    }
    av_packet_unref(packet.get());
    if (Interrupted(&v.box.input)) {
      return Fail(STOKER_MEDIA_TIMEOUT, "indexing took longer than %.0f s", limits.max_wall_seconds);
    }
  }
  std::sort(pts->begin(), pts->end());
  pts->erase(std::unique(pts->begin(), pts->end()), pts->end());
  if (pts->empty()) return Fail(STOKER_MEDIA_CORRUPT, "the video stream holds no frames");
  const double span =
      (static_cast<double>(pts->back()) - static_cast<double>(pts->front())) * av_q2d(v.stream->time_base);
  if (limits.max_seconds > 0 && span > limits.max_seconds) {
    return Fail(STOKER_MEDIA_TOO_LARGE, "the video stream lasts %.1f s; at most %.1f s are read (--max-media-seconds)",
                span, limits.max_seconds);
  }
  *width = v.stream->codecpar->width;
  *height = v.stream->codecpar->height;
  *seconds_per_tick = av_q2d(v.stream->time_base);
  return {};
}

// The stream's decoder, opened with the limits' threads and pixel bound.
Failure OpenDecoder(const VideoStream& v, const StokerVideoLimits& limits,
                    std::unique_ptr<AVCodecContext, CodecDeleter>* out) {
  std::unique_ptr<AVCodecContext, CodecDeleter> decoder(avcodec_alloc_context3(v.codec));
  if (!decoder) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate the decoder");
  int err = avcodec_parameters_to_context(decoder.get(), v.stream->codecpar);
  if (err < 0) return Fail(STOKER_MEDIA_CORRUPT, "the stream's parameters: %s", AvError(err).c_str());
  // One thread while the pool decodes as many clips as it has cores;
  // more when few clips are being decoded (decoder_threads.h). FFmpeg's
  // frame threads give the same frames as one thread, in the same order.
  decoder->thread_count = std::clamp(limits.decoder_threads, 1, 64);
  decoder->pkt_timebase = v.stream->time_base;
  if (limits.max_pixels > 0) decoder->max_pixels = limits.max_pixels;
  err = avcodec_open2(decoder.get(), v.codec, nullptr);
  if (err < 0)
    return Fail(STOKER_MEDIA_CORRUPT, "the %s decoder does not open: %s", v.codec->name, AvError(err).c_str());
  *out = std::move(decoder);
  return {};
}

// Decodes pts[0..n), handing each to `sink` as it comes; `seek`: from the
// keyframe before pts[0], else from the start. *missed: a frame was not
// where the seek put the decoder.
Failure Frames(const uint8_t* data, size_t size, const StokerVideoLimits& limits, const int64_t* pts, int n, int width,
               int height, StokerFrameSink sink, void* opaque, bool seek, bool* missed) {
  *missed = false;
  VideoStream v;
  if (Failure f = v.Open(data, size, limits); f.code != STOKER_MEDIA_OK) return f;
  std::unique_ptr<AVCodecContext, CodecDeleter> decoder;
  if (Failure f = OpenDecoder(v, limits, &decoder); f.code != STOKER_MEDIA_OK) return f;
  int err = 0;
  if (seek && av_seek_frame(v.box.format, v.index, pts[0], AVSEEK_FLAG_BACKWARD) < 0) {
    *missed = true;
    return Fail(STOKER_MEDIA_CORRUPT, "cannot seek");
  }
  std::unique_ptr<AVPacket, PacketDeleter> packet(av_packet_alloc());
  std::unique_ptr<AVFrame, FrameDeleter> frame(av_frame_alloc());
  std::unique_ptr<AVFrame, FrameDeleter> rgb(av_frame_alloc());
  if (!packet || !frame || !rgb) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate a frame");
  rgb->format = AV_PIX_FMT_RGB24;
  rgb->width = width;
  rgb->height = height;
  if (av_frame_get_buffer(rgb.get(), 0) < 0) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate an RGB frame");
  std::unique_ptr<SwsContext, SwsDeleter> sws;
  int sws_format = -1;
  bool keyed = !seek;  // from the start every frame counts
  int next = 0;

  auto drain = [&]() -> Failure {
    while (next < n) {
      const int r = avcodec_receive_frame(decoder.get(), frame.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return {};
      if (r < 0)
        return Fail(STOKER_MEDIA_CORRUPT, "the %s stream does not decode: %s", v.codec->name, AvError(r).c_str());
      const int64_t ts = frame->best_effort_timestamp != AV_NOPTS_VALUE ? frame->best_effort_timestamp : frame->pts;
      if (!keyed) {
        // After a seek, frames before the first keyframe out are an open
        // GOP's leading pictures, made from references the seek skipped:
        // never taken. A wanted one among them: decode from the start.
        if (frame->key_frame) {
          keyed = true;
        } else {
          const bool wanted = ts != AV_NOPTS_VALUE && ts >= pts[next];
          av_frame_unref(frame.get());
          if (!wanted) continue;
          *missed = true;
          return Fail(STOKER_MEDIA_CORRUPT, "the frame at timestamp %lld precedes the keyframe the seek found",
                      static_cast<long long>(ts));
        }
      }
      if (ts == AV_NOPTS_VALUE || ts < pts[next]) {
        av_frame_unref(frame.get());
        continue;
      }
      if (ts > pts[next]) {  // the wanted frame went by undecoded: the seek landed after it
        av_frame_unref(frame.get());
        *missed = true;
        return Fail(STOKER_MEDIA_CORRUPT, "no frame at timestamp %lld (the next is %lld)",
                    static_cast<long long>(pts[next]), static_cast<long long>(ts));
      }
      if (frame->width != width || frame->height != height) {
        av_frame_unref(frame.get());
        return Fail(STOKER_MEDIA_CORRUPT, "a frame of %dx%d in a %dx%d stream", frame->width, frame->height, width,
                    height);
      }
      if (!sws || frame->format != sws_format) {  // the first frame, or the stream changed its pixel format
        sws.reset(sws_getContext(width, height, static_cast<AVPixelFormat>(frame->format), width, height,
                                 AV_PIX_FMT_RGB24, SWS_BILINEAR, nullptr, nullptr, nullptr));
        sws_format = frame->format;
        if (!sws) {
          av_frame_unref(frame.get());
          return Fail(STOKER_MEDIA_UNSUPPORTED, "no conversion from pixel format %d to RGB", frame->format);
        }
      }
      sws_scale(sws.get(), frame->data, frame->linesize, 0, height, rgb->data, rgb->linesize);
      av_frame_unref(frame.get());
      while (next < n && pts[next] == ts) {
        if (sink(opaque, next, rgb->data[0], rgb->linesize[0]) != 0) {
          return Fail(STOKER_MEDIA_STOPPED, "the caller stopped the decode at frame %d", next);
        }
        ++next;
      }
    }
    return {};
  };

  while (next < n) {
    err = av_read_frame(v.box.format, packet.get());
    if (err == AVERROR_EXIT)
      return Fail(STOKER_MEDIA_TIMEOUT, "decoding took longer than %.0f s", limits.max_wall_seconds);
    if (err < 0) break;  // the end (or a cut end): the decoder's last frames below
    if (packet->stream_index != v.index) {
      av_packet_unref(packet.get());
      continue;
    }
    err = avcodec_send_packet(decoder.get(), packet.get());
    av_packet_unref(packet.get());
    if (err < 0 && err != AVERROR(EAGAIN) && err != AVERROR_INVALIDDATA) {
      return Fail(STOKER_MEDIA_CORRUPT, "the %s stream does not decode: %s", v.codec->name, AvError(err).c_str());
    }
    if (Failure f = drain(); f.code != STOKER_MEDIA_OK) return f;
    if (Interrupted(&v.box.input)) {
      return Fail(STOKER_MEDIA_TIMEOUT, "decoding took longer than %.0f s", limits.max_wall_seconds);
    }
  }
  if (next < n) {
    avcodec_send_packet(decoder.get(), nullptr);
    if (Failure f = drain(); f.code != STOKER_MEDIA_OK) return f;
  }
  if (next < n) {
    return Fail(STOKER_MEDIA_TRUNCATED, "the stream ends before the frame at timestamp %lld",
                static_cast<long long>(pts[next]));
  }
  return {};
}

}  // namespace
}  // namespace stoker_media

using namespace stoker_media;  // NOLINT: the C entry points below

extern "C" {

__attribute__((visibility("default"))) int stoker_media_video_index(const uint8_t* data, size_t size,
                                                                    const StokerVideoLimits* limits, int* width,
                                                                    int* height, int64_t** pts, int64_t* frames,
                                                                    double* seconds_per_tick, char* error,
                                                                    size_t error_size) {
  PrepareFfmpeg();
  *pts = nullptr;
  *frames = 0;
  *seconds_per_tick = 0;
  Failure f;
  std::vector<int64_t> index;
  try {
    f = Index(data, size, *limits, width, height, &index, seconds_per_tick);
  } catch (const std::bad_alloc&) {
    f = Fail(STOKER_MEDIA_NO_MEMORY, "out of memory while indexing a video");
  }
  if (f.code == STOKER_MEDIA_OK) {
    auto* out = static_cast<int64_t*>(std::malloc(index.size() * sizeof(int64_t)));
    if (out == nullptr) {
      f = Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate an index of %zu frames", index.size());
    } else {
      std::copy(index.begin(), index.end(), out);
      *pts = out;
      *frames = static_cast<int64_t>(index.size());
      return STOKER_MEDIA_OK;
    }
  }
  CopyMessage(f.message, error, error_size);
  return f.code;
}

__attribute__((visibility("default"))) int stoker_media_video_frames_each(
    const uint8_t* data, size_t size, const StokerVideoLimits* limits, const int64_t* pts, int n, int width, int height,
    StokerFrameSink sink, void* opaque, char* error, size_t error_size) {
  PrepareFfmpeg();
  Failure f;
  if (n < 1 || width < 1 || height < 1 || sink == nullptr || !std::is_sorted(pts, pts + n)) {
    f = Fail(STOKER_MEDIA_CORRUPT, "bad request: %d frames of %dx%d, timestamps ascending", n, width, height);
  } else {
    try {
      bool missed = false;
      const int64_t start = av_gettime_relative();
      f = Frames(data, size, *limits, pts, n, width, height, sink, opaque, /*seek=*/true, &missed);
      if (missed) {  // again from the start, within what is left of the time limit
        StokerVideoLimits rest = *limits;
        if (rest.max_wall_seconds > 0) {
          rest.max_wall_seconds -= static_cast<double>(av_gettime_relative() - start) / 1e6;
          if (rest.max_wall_seconds <= 0) rest.max_wall_seconds = 1e-6;
        }
        f = Frames(data, size, rest, pts, n, width, height, sink, opaque, /*seek=*/false, &missed);
      }
    } catch (const std::bad_alloc&) {
      f = Fail(STOKER_MEDIA_NO_MEMORY, "out of memory while decoding a video");
    }
  }
  if (f.code == STOKER_MEDIA_OK) return STOKER_MEDIA_OK;
  CopyMessage(f.message, error, error_size);
  return f.code;
}

__attribute__((visibility("default"))) int stoker_media_video_frames(const uint8_t* data, size_t size,
                                                                     const StokerVideoLimits* limits,
                                                                     const int64_t* pts, int n, int width, int height,
                                                                     uint8_t* out, char* error, size_t error_size) {
  struct Into {
    uint8_t* out;
    size_t row;
    int height;
  } into{out, static_cast<size_t>(width) * 3, height};
  const StokerFrameSink copy = [](void* opaque, int i, const uint8_t* rgb, int linesize) {
    const auto* to = static_cast<const Into*>(opaque);
    uint8_t* dst = to->out + static_cast<size_t>(i) * to->row * static_cast<size_t>(to->height);
    for (int y = 0; y < to->height; ++y) std::memcpy(dst + y * to->row, rgb + y * linesize, to->row);
    return 0;
  };
  return stoker_media_video_frames_each(data, size, limits, pts, n, width, height, copy, &into, error, error_size);
}

}  // extern "C"
