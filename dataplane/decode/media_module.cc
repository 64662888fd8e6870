// libstoker_media.so: FFmpeg's demuxers, decoders and resampler behind the C
// interface of media_abi.h. Input is a sample's bytes in memory (a custom
// AVIOContext), never a path or a URL: only the demuxers listed below are
// allowed, and every loop is bounded (duration, packets without output, wall
// time), so that a hostile file fails its sample instead of hanging a worker.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "dataplane/decode/media_abi.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/time.h>
#include <libswresample/swresample.h>
}

#include "dataplane/decode/media_internal.h"

namespace stoker_media {
namespace {

// Collects the resampled output, planar, and stops at the frame limit.
class Output {
 public:
  Output(int channels, int64_t max_frames) : channels_(channels), max_frames_(max_frames), planes_(channels) {}

  // Appends what swr gives for `in` (null: the flush). False past the limit.
  Failure Convert(SwrContext* swr, const uint8_t** in, int in_count) {
    int room = swr_get_out_samples(swr, in_count);
    if (room < 0) return Fail(STOKER_MEDIA_CORRUPT, "the resampler failed: %s", AvError(room).c_str());
    // Never more than one sample past the limit: swresample keeps the rest,
    // and over() then stops the decode before anything larger is allocated.
    room = static_cast<int>(std::min<int64_t>(room, std::max<int64_t>(0, max_frames_ + 1 - frames_)));
    std::vector<uint8_t*> out(static_cast<size_t>(channels_));
    try {
      for (int c = 0; c < channels_; ++c) {
        planes_[c].resize(static_cast<size_t>(frames_) + static_cast<size_t>(room));
        out[c] = reinterpret_cast<uint8_t*>(planes_[c].data() + frames_);
      }
    } catch (const std::bad_alloc&) {
      return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate %d more samples", room);
    }
    const int n = swr_convert(swr, out.data(), room, in, in_count);
    if (n < 0) return Fail(STOKER_MEDIA_CORRUPT, "the resampler failed: %s", AvError(n).c_str());
    frames_ += n;
    for (int c = 0; c < channels_; ++c) planes_[c].resize(static_cast<size_t>(frames_));
    return {};
  }

  bool over() const { return frames_ > max_frames_; }
  int64_t frames() const { return frames_; }
  std::vector<std::vector<float>> TakePlanes() { return std::move(planes_); }

 private:
  int channels_;
  int64_t max_frames_;
  int64_t frames_ = 0;
  std::vector<std::vector<float>> planes_;
};

// The length a WAV header states for its data chunk, in seconds (0: none
// stated, or not a WAV): FFmpeg's demuxer clips it to the bytes there are,
// which hides a cut file and a header announcing hours.
// A RIFF/WAVE file whose chunk (other than the data chunk, which a cut file
// ends inside) states more bytes than the file has: FFmpeg's demuxer
// allocates a tag by its stated size before reading it (a LIST chunk of
// 4 GiB in a 7 KB file made it allocate 1.4 GB). Empty when fine.
std::string BadWavChunk(const uint8_t* data, size_t size) {
  if (size < 12 || std::memcmp(data, "RIFF", 4) != 0 || std::memcmp(data + 8, "WAVE", 4) != 0) return "";
  for (size_t at = 12; at + 8 <= size;) {
    const uint32_t chunk = static_cast<uint32_t>(data[at + 4]) | static_cast<uint32_t>(data[at + 5]) << 8 |
                           static_cast<uint32_t>(data[at + 6]) << 16 | static_cast<uint32_t>(data[at + 7]) << 24;
    if (std::memcmp(data + at, "data", 4) == 0) return "";
    if (chunk > size - at - 8) {
      return std::string(reinterpret_cast<const char*>(data + at), 4) + " chunk states " + std::to_string(chunk) +
             " bytes; the file has " + std::to_string(size - at - 8) + " after it";
    }
    at += 8 + chunk + (chunk & 1);
  }
  return "";
}

double WavAnnounced(const uint8_t* data, size_t size, const AVCodecParameters* par) {
  auto u32 = [data](size_t at) {
    return static_cast<uint32_t>(data[at]) | static_cast<uint32_t>(data[at + 1]) << 8 |
           static_cast<uint32_t>(data[at + 2]) << 16 | static_cast<uint32_t>(data[at + 3]) << 24;
  };
  if (size < 12 || std::memcmp(data, "RIFF", 4) != 0 || std::memcmp(data + 8, "WAVE", 4) != 0) return 0;
  if (par->block_align <= 0 || par->sample_rate <= 0) return 0;
  for (size_t at = 12; at + 8 <= size;) {
    const uint32_t chunk = u32(at + 4);
    if (std::memcmp(data + at, "data", 4) == 0) {
      if (chunk == 0 || chunk == 0xffffffffu) return 0;  // streamed: no length stated
      return static_cast<double>(chunk) / par->block_align / par->sample_rate;
    }
    at += 8 + chunk + (chunk & 1);
  }
  return 0;
}

Failure DecodeAudio(const uint8_t* data, size_t size, const StokerAudioRequest& request,
                    std::vector<std::vector<float>>* planes, int64_t* frames, double* start_seconds) {
  if (size == 0) return Fail(STOKER_MEDIA_EMPTY, "zero bytes");
  if (request.rate < 1 || request.rate > kMaxRate || request.channels < 1 || request.channels > kMaxChannels) {
    return Fail(STOKER_MEDIA_CORRUPT, "bad request: rate %d, channels %d", request.rate, request.channels);
  }
  if (std::string bad = BadWavChunk(data, size); !bad.empty()) {
    for (char& c : bad) c = (c >= 32 && c < 127) ? c : '?';
    return Fail(STOKER_MEDIA_CORRUPT, "a WAV file whose %s", bad.c_str());
  }
  Container box;
  box.input.data = data;
  box.input.size = static_cast<int64_t>(size);
  if (Failure f = box.Open(request.max_wall_seconds); f.code != STOKER_MEDIA_OK) return f;
  AVFormatContext* format = box.format;
  const AVCodec* codec = nullptr;
  const int index = av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, -1, &codec, 0);
  if (index == AVERROR_STREAM_NOT_FOUND) {
    return Fail(STOKER_MEDIA_UNSUPPORTED, "the %s container has no audio stream", format->iformat->name);
  }
  if (index == AVERROR_DECODER_NOT_FOUND || (index >= 0 && codec == nullptr)) {
    const AVCodecParameters* p = format->streams[std::max(index, 0)]->codecpar;
    const AVCodecDescriptor* d = avcodec_descriptor_get(p->codec_id);
    return Fail(STOKER_MEDIA_UNSUPPORTED, "the audio stream's codec (%s) is not one this server's FFmpeg decodes",
                d != nullptr ? d->name : "unknown");
  }
  if (index < 0) return Fail(STOKER_MEDIA_CORRUPT, "no audio stream could be chosen: %s", AvError(index).c_str());
  AVStream* stream = format->streams[index];
  for (unsigned i = 0; i < format->nb_streams; ++i) {
    if (static_cast<int>(i) != index) format->streams[i]->discard = AVDISCARD_ALL;
  }
  const AVCodecParameters* par = stream->codecpar;
  if (par->ch_layout.nb_channels < 1 || par->ch_layout.nb_channels > kMaxChannels) {
    return Fail(STOKER_MEDIA_TOO_LARGE, "the audio stream has %d channels; at most %d are read",
                par->ch_layout.nb_channels, kMaxChannels);
  }
  if (par->sample_rate < kMinRate || par->sample_rate > kMaxRate) {
    return Fail(STOKER_MEDIA_CORRUPT, "the audio stream's rate %d Hz is not %d..%d", par->sample_rate, kMinRate,
                kMaxRate);
  }
  // The duration the header announces, in seconds (0: none).
  double announced = 0;
  bool estimated = format->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE;
  if (stream->duration > 0 && stream->time_base.den > 0) {
    announced = static_cast<double>(stream->duration) * av_q2d(stream->time_base);
  } else if (format->duration > 0) {
    announced = static_cast<double>(format->duration) / AV_TIME_BASE;
    // The container's duration spans all its streams (a video's audio may
    // end before its pictures): a bound, not this stream's length.
    if (format->nb_streams > 1) estimated = true;
  }
  if (std::strcmp(format->iformat->name, "wav") == 0) {
    if (const double stated = WavAnnounced(data, size, par); stated > 0) {
      announced = stated;
      estimated = false;
    }
  }
  if (announced > request.max_seconds) {
    return Fail(STOKER_MEDIA_TOO_LARGE, "the audio stream announces %.1f s; at most %.1f s are decoded (--max-media-seconds)",
                announced, request.max_seconds);
  }

  std::unique_ptr<AVCodecContext, CodecDeleter> decoder(avcodec_alloc_context3(codec));
  if (!decoder) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate the decoder");
  int err = avcodec_parameters_to_context(decoder.get(), par);
  if (err < 0) return Fail(STOKER_MEDIA_CORRUPT, "the stream's parameters: %s", AvError(err).c_str());
  decoder->thread_count = 1;  // a worker decodes one sample; the pool runs many at once
  decoder->pkt_timebase = stream->time_base;
  err = avcodec_open2(decoder.get(), codec, nullptr);
  if (err < 0) return Fail(STOKER_MEDIA_CORRUPT, "the %s decoder does not open: %s", codec->name, AvError(err).c_str());

  std::unique_ptr<AVPacket, PacketDeleter> packet(av_packet_alloc());
  std::unique_ptr<AVFrame, FrameDeleter> frame(av_frame_alloc());
  if (!packet || !frame) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate a packet");
  std::unique_ptr<SwrContext, SwrDeleter> swr;
  AVChannelLayout out_layout{};
  av_channel_layout_default(&out_layout, request.channels);
  const auto max_frames = static_cast<int64_t>(std::ceil(request.max_seconds * request.rate));
  Output output(request.channels, max_frames);
  int in_rate = 0, in_format = -1, in_channels = 0;
  int64_t in_frames = 0;
  double first_seconds = 0;
  int idle_packets = 0;

  // Drains the decoder's frames into the resampler.
  auto drain = [&]() -> Failure {
    while (true) {
      const int r = avcodec_receive_frame(decoder.get(), frame.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return {};
      if (r < 0) return Fail(STOKER_MEDIA_CORRUPT, "the %s stream does not decode: %s", codec->name, AvError(r).c_str());
      idle_packets = 0;
      if (in_frames == 0) {
        const int64_t ts = frame->best_effort_timestamp != AV_NOPTS_VALUE ? frame->best_effort_timestamp : frame->pts;
        if (ts != AV_NOPTS_VALUE) first_seconds = static_cast<double>(ts) * av_q2d(stream->time_base);
      }
      const int channels = frame->ch_layout.nb_channels;
      if (frame->sample_rate < kMinRate || frame->sample_rate > kMaxRate || channels < 1 || channels > kMaxChannels) {
        av_frame_unref(frame.get());
        return Fail(STOKER_MEDIA_CORRUPT, "a frame of %d channels at %d Hz", channels, frame->sample_rate);
      }
      if (!swr) {
        AVChannelLayout in_layout{};  // zeroed: av_channel_layout_copy uninits its destination first
        if (frame->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC) {
          av_channel_layout_default(&in_layout, channels);
        } else if (av_channel_layout_copy(&in_layout, &frame->ch_layout) < 0) {
          return Fail(STOKER_MEDIA_NO_MEMORY, "could not copy the channel layout");
        }
        SwrContext* s = nullptr;
        const int e = swr_alloc_set_opts2(&s, &out_layout, AV_SAMPLE_FMT_FLTP, request.rate, &in_layout,
                                          static_cast<AVSampleFormat>(frame->format), frame->sample_rate, 0, nullptr);
        av_channel_layout_uninit(&in_layout);
        swr.reset(s);
        if (e >= 0 && request.channels == 1 && channels > 1) {
          // Mono is the mean of the channels (torchaudio's waveform.mean(0)),
          // not swresample's -3 dB sum, which can clip.
          std::vector<double> matrix(static_cast<size_t>(channels), 1.0 / channels);
          if (swr_set_matrix(swr.get(), matrix.data(), channels) < 0) {
            return Fail(STOKER_MEDIA_CORRUPT, "no mix-down of %d channels", channels);
          }
        }
        if (e < 0 || swr_init(swr.get()) < 0) {
          return Fail(STOKER_MEDIA_CORRUPT, "no resampler from %d channels at %d Hz", channels, frame->sample_rate);
        }
        in_rate = frame->sample_rate;
        in_format = frame->format;
        in_channels = channels;
      } else if (frame->sample_rate != in_rate || frame->format != in_format || channels != in_channels) {
        return Fail(STOKER_MEDIA_CORRUPT, "the audio changes from %d channels at %d Hz to %d at %d Hz mid-stream",
                    in_channels, in_rate, channels, frame->sample_rate);
      }
      in_frames += frame->nb_samples;
      Failure f = output.Convert(swr.get(), const_cast<const uint8_t**>(frame->extended_data), frame->nb_samples);
      av_frame_unref(frame.get());
      if (f.code != STOKER_MEDIA_OK) return f;
      if (output.over()) {
        return Fail(STOKER_MEDIA_TOO_LARGE, "the audio stream is longer than %.1f s (--max-media-seconds)",
                    request.max_seconds);
      }
    }
  };

  // A decode error is judged by what follows it: the last packet of the
  // bytes failing is a cut file (truncated); one with packets after it, a
  // corrupt stream.
  Failure held;
  while (true) {
    err = av_read_frame(format, packet.get());
    if (err == AVERROR_EXIT) {
      return Fail(STOKER_MEDIA_CORRUPT, "decoding took longer than %.0f s", request.max_wall_seconds);
    }
    if (err < 0) {
      if (held.code != STOKER_MEDIA_OK || (err != AVERROR_EOF && box.input.pos >= box.input.size)) {
        return Fail(STOKER_MEDIA_TRUNCATED, "the stream ends mid-frame (%s): the file is cut",
                    held.code != STOKER_MEDIA_OK ? held.message.c_str() : AvError(err).c_str());
      }
      if (err == AVERROR_EOF) break;
      return Fail(STOKER_MEDIA_CORRUPT, "the container does not demux: %s", AvError(err).c_str());
    }
    if (packet->stream_index != index) {
      av_packet_unref(packet.get());
      continue;
    }
    if (held.code != STOKER_MEDIA_OK) return held;
    if (++idle_packets > kMaxIdlePackets) {
      return Fail(STOKER_MEDIA_CORRUPT, "%d packets in a row decoded to no audio", kMaxIdlePackets);
    }
    err = avcodec_send_packet(decoder.get(), packet.get());
    av_packet_unref(packet.get());
    if (err < 0 && err != AVERROR(EAGAIN)) {
      held = Fail(STOKER_MEDIA_CORRUPT, "the %s stream does not decode: %s", codec->name, AvError(err).c_str());
      continue;
    }
    if (Failure f = drain(); f.code == STOKER_MEDIA_CORRUPT) {
      held = f;
    } else if (f.code != STOKER_MEDIA_OK) {
      return f;
    }
    if (Interrupted(&box.input)) {
      return Fail(STOKER_MEDIA_CORRUPT, "decoding took longer than %.0f s", request.max_wall_seconds);
    }
  }
  avcodec_send_packet(decoder.get(), nullptr);  // the decoder's last frames
  if (Failure f = drain(); f.code != STOKER_MEDIA_OK) return f;
  if (!swr || in_frames == 0) return Fail(STOKER_MEDIA_CORRUPT, "the %s stream holds no audio", codec->name);
  if (Failure f = output.Convert(swr.get(), nullptr, 0); f.code != STOKER_MEDIA_OK) return f;
  if (output.over()) {
    return Fail(STOKER_MEDIA_TOO_LARGE, "the audio stream is longer than %.1f s (--max-media-seconds)",
                request.max_seconds);
  }
  if (output.frames() == 0) {
    return Fail(STOKER_MEDIA_CORRUPT, "%lld samples of %s at %d Hz resample to none at %d Hz",
                static_cast<long long>(in_frames), codec->name, in_rate, request.rate);
  }
  // Less than the header announced (where it states a length rather than
  // estimating one from the bit rate): the file was cut.
  const double found = static_cast<double>(in_frames) / in_rate;
  if (announced > 0 && !estimated && found < 0.98 * announced - 0.05) {
    return Fail(STOKER_MEDIA_TRUNCATED, "%.3f s of audio decoded where the header announces %.3f s", found, announced);
  }
  *frames = output.frames();
  *planes = output.TakePlanes();
  *start_seconds = first_seconds;
  return {};
}

}  // namespace
}  // namespace stoker_media

using namespace stoker_media;  // NOLINT: the C entry points below

extern "C" {

__attribute__((visibility("default"))) int stoker_media_decode_audio(const uint8_t* data, size_t size,
                                                                      const StokerAudioRequest* request,
                                                                      float** samples, int64_t* frames,
                                                                      double* start_seconds, char* error,
                                                                      size_t error_size) {
  PrepareFfmpeg();
  *samples = nullptr;
  *frames = 0;
  double start = 0;
  Failure f;
  std::vector<std::vector<float>> planes;
  int64_t n = 0;
  try {
    f = DecodeAudio(data, size, *request, &planes, &n, &start);
  } catch (const std::bad_alloc&) {
    f = Fail(STOKER_MEDIA_NO_MEMORY, "out of memory while decoding audio");
  } catch (const std::exception& e) {
    f = Fail(STOKER_MEDIA_CORRUPT, "%s", e.what());
  }
  if (f.code == STOKER_MEDIA_OK) {
    const size_t total = static_cast<size_t>(n) * planes.size();
    auto* out = static_cast<float*>(std::malloc(std::max<size_t>(1, total) * sizeof(float)));
    if (out == nullptr) {
      f = Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate %zu samples", total);
    } else {
      for (size_t c = 0; c < planes.size(); ++c) {
        std::copy(planes[c].begin(), planes[c].end(), out + c * static_cast<size_t>(n));
      }
      *samples = out;
      *frames = n;
      if (start_seconds != nullptr) *start_seconds = start;
      return STOKER_MEDIA_OK;
    }
  }
  CopyMessage(f.message, error, error_size);
  return f.code;
}

__attribute__((visibility("default"))) void stoker_media_free(void* p) { std::free(p); }

__attribute__((visibility("default"))) const char* stoker_media_version(void) {
  static const std::string version = std::string("libavformat ") + AV_STRINGIFY(LIBAVFORMAT_VERSION) +
                                     ", libavcodec " + AV_STRINGIFY(LIBAVCODEC_VERSION) + ", libswresample " +
                                     AV_STRINGIFY(LIBSWRESAMPLE_VERSION);
  return version.c_str();
}

}  // extern "C"
