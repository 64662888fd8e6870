// libstoker_media.so's audio (media_abi.h): the first audio stream of a
// container in memory, decoded by libavcodec and resampled by libswresample
// to float32, kept whole, counted, or kept only in windows, so that a sample
// holds what its window needs rather than the whole stream.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/decode/media_abi.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/mathematics.h>
#include <libavutil/opt.h>
#include <libavutil/samplefmt.h>
#include <libavutil/time.h>
#include <libswresample/swresample.h>
}

#include "dataplane/decode/media_audio_output.h"
#include "dataplane/decode/media_internal.h"

namespace stoker_media {
namespace {

using audio_output::Grid;
using audio_output::GridOf;
using audio_output::Output;
using audio_output::SamplesFrom;
using audio_output::TailCount;

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

// One decode: the container and its audio stream, the decoder, the
// resampler made at the first frame (to the request's rate and channels),
// and the output it fills. Open chooses and checks the stream; Read decodes
// every packet (a decode error is judged by what follows it); Finish checks
// the length and hands the result over.
class AudioDecode {
 public:
  AudioDecode(const uint8_t* data, size_t size, const StokerAudioRequest& request, const StokerAudioKeep& keep)
      : data_(data), size_(size), request_(request), keep_(keep) {}

  Failure Open();
  Failure Read();
  Failure Finish(std::vector<std::vector<float>>* planes, std::vector<float>* kept, int64_t* frames,
                 double* start_seconds);

 private:
  // The stream's length as its header announces it (0: none), and whether
  // that is an estimate from the bit rate.
  void Announce();
  Failure OpenDecoder();
  // Drains the decoder's frames into the resampler.
  Failure Drain();
  // The resampler, at the first frame: from its layout, format and rate.
  Failure StartResampler(int channels);

  const uint8_t* const data_;
  const size_t size_;
  const StokerAudioRequest& request_;
  const StokerAudioKeep& keep_;
  Container box_;
  AVFormatContext* format_ = nullptr;
  const AVCodec* codec_ = nullptr;
  int index_ = -1;
  AVStream* stream_ = nullptr;
  double announced_ = 0;
  bool estimated_ = false;
  std::unique_ptr<AVCodecContext, CodecDeleter> decoder_;
  std::unique_ptr<AVPacket, PacketDeleter> packet_;
  std::unique_ptr<AVFrame, FrameDeleter> frame_;
  std::unique_ptr<SwrContext, SwrDeleter> swr_;
  AVChannelLayout out_layout_{};
  std::optional<Output> output_;  // made once the request and the stream are checked
  int in_rate_ = 0, in_format_ = -1, in_channels_ = 0;
  int64_t in_frames_ = 0;
  double first_seconds_ = 0;
  int idle_packets_ = 0;
  Grid grid_;
  std::vector<const uint8_t*> from_;  // a frame's samples from where the resampler starts
};

Failure AudioDecode::Open() {
  if (size_ == 0) return Fail(STOKER_MEDIA_EMPTY, "zero bytes");
  if (request_.rate < 1 || request_.rate > kMaxRate || request_.channels < 1 || request_.channels > kMaxChannels) {
    return Fail(STOKER_MEDIA_CORRUPT, "bad request: rate %d, channels %d", request_.rate, request_.channels);
  }
  if (std::string bad = BadWavChunk(data_, size_); !bad.empty()) {
    for (char& c : bad) c = (c >= 32 && c < 127) ? c : '?';
    return Fail(STOKER_MEDIA_CORRUPT, "a WAV file whose %s", bad.c_str());
  }
  box_.input.data = data_;
  box_.input.size = static_cast<int64_t>(size_);
  if (Failure f = box_.Open(request_.max_wall_seconds); f.code != STOKER_MEDIA_OK) return f;
  format_ = box_.format;
  index_ = av_find_best_stream(format_, AVMEDIA_TYPE_AUDIO, -1, -1, &codec_, 0);
  if (index_ == AVERROR_STREAM_NOT_FOUND) {
    return Fail(STOKER_MEDIA_UNSUPPORTED, "the %s container has no audio stream", format_->iformat->name);
  }
  if (index_ == AVERROR_DECODER_NOT_FOUND || (index_ >= 0 && codec_ == nullptr)) {
    const AVCodecParameters* p = format_->streams[std::max(index_, 0)]->codecpar;
    const AVCodecDescriptor* d = avcodec_descriptor_get(p->codec_id);
    return Fail(STOKER_MEDIA_UNSUPPORTED, "the audio stream's codec (%s) is not one this server's FFmpeg decodes",
                d != nullptr ? d->name : "unknown");
  }
  if (index_ < 0) return Fail(STOKER_MEDIA_CORRUPT, "no audio stream could be chosen: %s", AvError(index_).c_str());
  stream_ = format_->streams[index_];
  for (unsigned i = 0; i < format_->nb_streams; ++i) {
    if (static_cast<int>(i) != index_) format_->streams[i]->discard = AVDISCARD_ALL;
  }
  const AVCodecParameters* par = stream_->codecpar;
  if (par->ch_layout.nb_channels < 1 || par->ch_layout.nb_channels > kMaxChannels) {
    return Fail(STOKER_MEDIA_TOO_LARGE, "the audio stream has %d channels; at most %d are read",
                par->ch_layout.nb_channels, kMaxChannels);
  }
  if (par->sample_rate < kMinRate || par->sample_rate > kMaxRate) {
    return Fail(STOKER_MEDIA_CORRUPT, "the audio stream's rate %d Hz is not %d..%d", par->sample_rate, kMinRate,
                kMaxRate);
  }
  Announce();
  if (announced_ > request_.max_seconds) {
    return Fail(STOKER_MEDIA_TOO_LARGE,
                "the audio stream announces %.1f s; at most %.1f s are decoded (--max-media-seconds)", announced_,
                request_.max_seconds);
  }
  return OpenDecoder();
}

void AudioDecode::Announce() {
  const AVCodecParameters* par = stream_->codecpar;
  estimated_ = format_->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE;
  if (stream_->duration > 0 && stream_->time_base.den > 0) {
    announced_ = static_cast<double>(stream_->duration) * av_q2d(stream_->time_base);
  } else if (format_->duration > 0) {
    announced_ = static_cast<double>(format_->duration) / AV_TIME_BASE;
    // The container's duration spans all its streams (a video's audio may
    // end before its pictures): a bound, not this stream's length.
    if (format_->nb_streams > 1) estimated_ = true;
  }
  if (std::strcmp(format_->iformat->name, "wav") == 0) {
    if (const double stated = WavAnnounced(data_, size_, par); stated > 0) {
      announced_ = stated;
      estimated_ = false;
    }
  }
}

Failure AudioDecode::OpenDecoder() {
  decoder_.reset(avcodec_alloc_context3(codec_));
  if (!decoder_) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate the decoder");
  int err = avcodec_parameters_to_context(decoder_.get(), stream_->codecpar);
  if (err < 0) return Fail(STOKER_MEDIA_CORRUPT, "the stream's parameters: %s", AvError(err).c_str());
  decoder_->thread_count = 1;  // a worker decodes one sample; the pool runs many at once
  decoder_->pkt_timebase = stream_->time_base;
  err = avcodec_open2(decoder_.get(), codec_, nullptr);
  if (err < 0)
    return Fail(STOKER_MEDIA_CORRUPT, "the %s decoder does not open: %s", codec_->name, AvError(err).c_str());
  packet_.reset(av_packet_alloc());
  frame_.reset(av_frame_alloc());
  if (!packet_ || !frame_) return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate a packet");
  av_channel_layout_default(&out_layout_, request_.channels);
  output_.emplace(request_.channels, static_cast<int64_t>(std::ceil(request_.max_seconds * request_.rate)), keep_);
  return {};
}

Failure AudioDecode::StartResampler(int channels) {
  AVChannelLayout in_layout{};  // zeroed: av_channel_layout_copy uninits its destination first
  if (frame_->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC) {
    av_channel_layout_default(&in_layout, channels);
  } else if (av_channel_layout_copy(&in_layout, &frame_->ch_layout) < 0) {
    return Fail(STOKER_MEDIA_NO_MEMORY, "could not copy the channel layout");
  }
  SwrContext* s = nullptr;
  const int e = swr_alloc_set_opts2(&s, &out_layout_, AV_SAMPLE_FMT_FLTP, request_.rate, &in_layout,
                                    static_cast<AVSampleFormat>(frame_->format), frame_->sample_rate, 0, nullptr);
  av_channel_layout_uninit(&in_layout);
  swr_.reset(s);
  if (e >= 0 && request_.channels == 1 && channels > 1) {
    // Mono is the mean of the channels (torchaudio's waveform.mean(0)),
    // not swresample's -3 dB sum, which can clip.
    std::vector<double> matrix(static_cast<size_t>(channels), 1.0 / channels);
    if (swr_set_matrix(swr_.get(), matrix.data(), channels) < 0) {
      return Fail(STOKER_MEDIA_CORRUPT, "no mix-down of %d channels", channels);
    }
  }
  if (e < 0 || swr_init(swr_.get()) < 0) {
    return Fail(STOKER_MEDIA_CORRUPT, "no resampler from %d channels at %d Hz", channels, frame_->sample_rate);
  }
  in_rate_ = frame_->sample_rate;
  in_format_ = frame_->format;
  in_channels_ = channels;
  grid_ = GridOf(swr_.get(), in_rate_, request_.rate);
  return output_->Place(first_seconds_, request_.rate, grid_);
}

Failure AudioDecode::Drain() {
  while (true) {
    const int r = avcodec_receive_frame(decoder_.get(), frame_.get());
    if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return {};
    if (r < 0) return Fail(STOKER_MEDIA_CORRUPT, "the %s stream does not decode: %s", codec_->name, AvError(r).c_str());
    idle_packets_ = 0;
    if (in_frames_ == 0) {
      const int64_t ts = frame_->best_effort_timestamp != AV_NOPTS_VALUE ? frame_->best_effort_timestamp : frame_->pts;
      if (ts != AV_NOPTS_VALUE) first_seconds_ = static_cast<double>(ts) * av_q2d(stream_->time_base);
    }
    const int channels = frame_->ch_layout.nb_channels;
    if (frame_->sample_rate < kMinRate || frame_->sample_rate > kMaxRate || channels < 1 || channels > kMaxChannels) {
      av_frame_unref(frame_.get());
      return Fail(STOKER_MEDIA_CORRUPT, "a frame of %d channels at %d Hz", channels, frame_->sample_rate);
    }
    if (!swr_) {
      if (Failure f = StartResampler(channels); f.code != STOKER_MEDIA_OK) return f;
    } else if (frame_->sample_rate != in_rate_ || frame_->format != in_format_ || channels != in_channels_) {
      return Fail(STOKER_MEDIA_CORRUPT, "the audio changes from %d channels at %d Hz to %d at %d Hz mid-stream",
                  in_channels_, in_rate_, channels, frame_->sample_rate);
    }
    const int64_t frame_start = in_frames_;
    in_frames_ += frame_->nb_samples;
    // Input before the resampler's start, and past the last window, is
    // still decoded (a cut or corrupt file fails as it would), but not
    // resampled.
    Failure f;
    const int64_t skip = std::max<int64_t>(0, output_->resample_from() - frame_start);
    if (output_->wants_input() && skip < frame_->nb_samples) {
      SamplesFrom(frame_.get(), channels, skip, &from_);
      f = output_->Convert(swr_.get(), from_.data(), frame_->nb_samples - static_cast<int>(skip));
    }
    av_frame_unref(frame_.get());
    if (f.code != STOKER_MEDIA_OK) return f;
    if (output_->longer())
      return Fail(STOKER_MEDIA_LONGER, "longer than %lld frames", static_cast<long long>(keep_.whole_up_to));
    // Not resampling: the input's length bounds the decode (the exact
    // check of a count follows at the end).
    const double input_seconds = static_cast<double>(in_frames_) / in_rate_;
    if (output_->over() || (!output_->wants_input() && input_seconds > request_.max_seconds + 1)) {
      return Fail(STOKER_MEDIA_TOO_LARGE, "the audio stream is longer than %.1f s (--max-media-seconds)",
                  request_.max_seconds);
    }
  }
}

Failure AudioDecode::Read() {
  // A decode error is judged by what follows it: the last packet of the
  // bytes failing is a cut file (truncated); one with packets after it, a
  // corrupt stream.
  Failure held;
  while (true) {
    int err = av_read_frame(format_, packet_.get());
    if (err == AVERROR_EXIT) {
      return Fail(STOKER_MEDIA_TIMEOUT, "decoding took longer than %.0f s", request_.max_wall_seconds);
    }
    if (err < 0) {
      if (held.code != STOKER_MEDIA_OK || (err != AVERROR_EOF && box_.input.pos >= box_.input.size)) {
        return Fail(STOKER_MEDIA_TRUNCATED, "the stream ends mid-frame (%s): the file is cut",
                    held.code != STOKER_MEDIA_OK ? held.message.c_str() : AvError(err).c_str());
      }
      if (err == AVERROR_EOF) break;
      return Fail(STOKER_MEDIA_CORRUPT, "the container does not demux: %s", AvError(err).c_str());
    }
    if (packet_->stream_index != index_) {
      av_packet_unref(packet_.get());
      continue;
    }
    if (held.code != STOKER_MEDIA_OK) return held;
    if (++idle_packets_ > kMaxIdlePackets) {
      return Fail(STOKER_MEDIA_CORRUPT, "%d packets in a row decoded to no audio", kMaxIdlePackets);
    }
    err = avcodec_send_packet(decoder_.get(), packet_.get());
    av_packet_unref(packet_.get());
    if (err < 0 && err != AVERROR(EAGAIN)) {
      held = Fail(STOKER_MEDIA_CORRUPT, "the %s stream does not decode: %s", codec_->name, AvError(err).c_str());
      continue;
    }
    if (Failure f = Drain(); f.code == STOKER_MEDIA_CORRUPT) {
      held = f;
    } else if (f.code != STOKER_MEDIA_OK) {
      return f;
    }
    if (Interrupted(&box_.input)) {
      return Fail(STOKER_MEDIA_TIMEOUT, "decoding took longer than %.0f s", request_.max_wall_seconds);
    }
  }
  avcodec_send_packet(decoder_.get(), nullptr);  // the decoder's last frames
  return Drain();
}

Failure AudioDecode::Finish(std::vector<std::vector<float>>* planes, std::vector<float>* kept, int64_t* frames,
                            double* start_seconds) {
  if (!swr_ || in_frames_ == 0) return Fail(STOKER_MEDIA_CORRUPT, "the %s stream holds no audio", codec_->name);
  const bool resampled_all = output_->wants_input() || output_->count_by_tail();  // to the stream's end
  if (output_->wants_input()) {
    if (Failure f = output_->Convert(swr_.get(), nullptr, 0); f.code != STOKER_MEDIA_OK) return f;
  } else if (output_->count_by_tail()) {
    int64_t counted = 0;
    if (Failure f = TailCount(in_frames_, in_rate_, request_.rate, grid_, &counted); f.code != STOKER_MEDIA_OK)
      return f;
    output_->set_frames(counted);
  }
  if (output_->longer())
    return Fail(STOKER_MEDIA_LONGER, "longer than %lld frames", static_cast<long long>(keep_.whole_up_to));
  if (output_->over()) {
    return Fail(STOKER_MEDIA_TOO_LARGE, "the audio stream is longer than %.1f s (--max-media-seconds)",
                request_.max_seconds);
  }
  if (resampled_all && output_->frames() == 0) {
    return Fail(STOKER_MEDIA_CORRUPT, "%lld samples of %s at %d Hz resample to none at %d Hz",
                static_cast<long long>(in_frames_), codec_->name, in_rate_, request_.rate);
  }
  // Less than the header announced (where it states a length rather than
  // estimating one from the bit rate): the file was cut.
  const double found = static_cast<double>(in_frames_) / in_rate_;
  if (announced_ > 0 && !estimated_ && found < 0.98 * announced_ - 0.05) {
    return Fail(STOKER_MEDIA_TRUNCATED, "%.3f s of audio decoded where the header announces %.3f s", found, announced_);
  }
  *frames = resampled_all ? output_->frames() : -1;
  *planes = output_->TakePlanes();
  *kept = output_->TakeKept();
  *start_seconds = first_seconds_;
  return {};
}

// The decode itself. Whole: *planes gets the stream; windows: *kept; count:
// only *frames. *frames: the stream's resampled length, -1 when resampling
// stopped after the last window.
Failure DecodeAudio(const uint8_t* data, size_t size, const StokerAudioRequest& request, const StokerAudioKeep& keep,
                    std::vector<std::vector<float>>* planes, std::vector<float>* kept, int64_t* frames,
                    double* start_seconds) {
  AudioDecode decode(data, size, request, keep);
  if (Failure f = decode.Open(); f.code != STOKER_MEDIA_OK) return f;
  if (Failure f = decode.Read(); f.code != STOKER_MEDIA_OK) return f;
  return decode.Finish(planes, kept, frames, start_seconds);
}

}  // namespace
}  // namespace stoker_media

using namespace stoker_media;  // NOLINT: the C entry point below

extern "C" {

__attribute__((visibility("default"))) int stoker_media_decode_audio_kept(const uint8_t* data, size_t size,
                                                                          const StokerAudioRequest* request,
                                                                          const StokerAudioKeep* keep, float** samples,
                                                                          int64_t* frames, double* start_seconds,
                                                                          char* error, size_t error_size) {
  PrepareFfmpeg();
  *samples = nullptr;
  *frames = 0;
  double start = 0;
  Failure f;
  std::vector<std::vector<float>> planes;
  std::vector<float> kept;
  int64_t n = 0;
  if (keep->n_windows > 0 && (keep->window_frames < 1 || (keep->first == nullptr && keep->seconds == nullptr))) {
    f = Fail(STOKER_MEDIA_CORRUPT, "bad request: %d windows of %lld frames", keep->n_windows,
             static_cast<long long>(keep->window_frames));
  } else {
    try {
      f = DecodeAudio(data, size, *request, *keep, &planes, &kept, &n, &start);
    } catch (const std::bad_alloc&) {
      f = Fail(STOKER_MEDIA_NO_MEMORY, "out of memory while decoding audio");
    } catch (const std::exception& e) {
      f = Fail(STOKER_MEDIA_CORRUPT, "%s", e.what());
    }
  }
  if (f.code == STOKER_MEDIA_OK) {
    // Whole: C x frames; windows: K x C x L; count: nothing.
    const size_t total = planes.empty() ? kept.size() : static_cast<size_t>(n) * planes.size();
    auto* out = static_cast<float*>(std::malloc(std::max<size_t>(1, total) * sizeof(float)));
    if (out == nullptr) {
      f = Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate %zu samples", total);
    } else {
      if (planes.empty()) {
        std::copy(kept.begin(), kept.end(), out);
      } else {
        for (size_t c = 0; c < planes.size(); ++c) {
          std::copy(planes[c].begin(), planes[c].end(), out + c * static_cast<size_t>(n));
        }
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

}  // extern "C"
