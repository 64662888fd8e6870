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
#include <optional>
#include <new>
#include <string>
#include <vector>

#include "dataplane/decode/media_abi.h"

extern "C" {
#include <libavutil/mathematics.h>
#include <libavutil/opt.h>
#include <libavutil/samplefmt.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/time.h>
#include <libswresample/swresample.h>
}

#include "dataplane/decode/media_internal.h"

namespace stoker_media {
namespace {

// The resampler's grid when its positions are exact rationals (swresample's
// exact_rational with out/gcd within its phase count): output frame
// j x out_step sits at input frame j x in_step, so a resampler started at
// such an input frame makes the same samples as one started at the stream's
// beginning, once its filter has a pre-roll of real input (its start mirrors
// the first samples). Not exact: in_step 0.
struct Grid {
  int64_t in_step = 0, out_step = 0, preroll = 0;
  bool exact() const { return in_step > 0; }
};

Grid GridOf(SwrContext* swr, int in_rate, int out_rate) {
  int64_t exact = 0, phase_shift = 0;
  if (av_opt_get_int(swr, "exact_rational", 0, &exact) < 0 || av_opt_get_int(swr, "phase_shift", 0, &phase_shift) < 0 ||
      exact == 0 || phase_shift < 1 || phase_shift > 24) {
    return {};
  }
  int num = 0, den = 0;
  av_reduce(&num, &den, out_rate, in_rate, INT_MAX);
  if (num < 1 || num > (1 << phase_shift)) return {};
  Grid g;
  g.in_step = den;
  g.out_step = num;
  // The default filter spans 32 taps of the lower rate: twice its half, in input frames.
  g.preroll = 64 * ((in_rate + out_rate - 1) / out_rate + 1);
  return g;
}

// The number of frames swresample makes of `in_frames` input frames: it
// depends on the rates and the length alone, and the frames from an aligned
// input frame s on are those of a stream of in_frames - s, so a resampler
// run on the zeros of the last few thousand input frames gives it.
Failure TailCount(int64_t in_frames, int in_rate, int out_rate, const Grid& grid, int64_t* frames) {
  const int64_t margin = 8192 + 2 * grid.preroll;
  const int64_t s = std::max<int64_t>(0, in_frames - margin) / grid.in_step * grid.in_step;
  AVChannelLayout mono{};
  av_channel_layout_default(&mono, 1);
  SwrContext* raw = nullptr;
  if (swr_alloc_set_opts2(&raw, &mono, AV_SAMPLE_FMT_FLT, out_rate, &mono, AV_SAMPLE_FMT_FLT, in_rate, 0, nullptr) < 0 ||
      swr_init(raw) < 0) {
    swr_free(&raw);
    return Fail(STOKER_MEDIA_CORRUPT, "no resampler from %d Hz to %d Hz", in_rate, out_rate);
  }
  std::unique_ptr<SwrContext, SwrDeleter> swr(raw);
  const std::vector<float> zeros(4096, 0.0f);
  std::vector<float> out(static_cast<size_t>(4096) * static_cast<size_t>(out_rate / in_rate + 2) + 256);
  int64_t counted = 0;
  for (int64_t left = in_frames - s;;) {
    const int n = static_cast<int>(std::min<int64_t>(left, 4096));
    const uint8_t* in[1] = {reinterpret_cast<const uint8_t*>(zeros.data())};
    uint8_t* dst[1] = {reinterpret_cast<uint8_t*>(out.data())};
    const int r = swr_convert(swr.get(), dst, static_cast<int>(out.size()), n > 0 ? in : nullptr, n);
    if (r < 0) return Fail(STOKER_MEDIA_CORRUPT, "the resampler failed: %s", AvError(r).c_str());
    counted += r;
    if (n == 0 && r == 0) break;
    left -= n;
  }
  *frames = s / grid.in_step * grid.out_step + counted;
  return {};
}

// Pointers to a frame's samples from frame `skip` on.
void SamplesFrom(const AVFrame* frame, int channels, int64_t skip, std::vector<const uint8_t*>* out) {
  const auto format = static_cast<AVSampleFormat>(frame->format);
  const int64_t bytes = av_get_bytes_per_sample(format);
  const bool planar = av_sample_fmt_is_planar(format) != 0;
  out->assign(static_cast<size_t>(planar ? channels : 1), nullptr);
  for (size_t c = 0; c < out->size(); ++c) {
    (*out)[c] = frame->extended_data[c] + skip * bytes * (planar ? 1 : channels);
  }
}

// Collects the resampled output as `keep` asks (media_abi.h): the whole
// stream, planar, up to a limit; its length only; or windows of it, each
// resampled only as far as the last window needs.
class Output {
 public:
  Output(int channels, int64_t max_frames, const StokerAudioKeep& keep)
      : channels_(channels),
        max_frames_(max_frames),
        keep_(keep),
        whole_(!keep.count_only && keep.n_windows <= 0),
        planes_(whole_ ? channels : 0) {
    if (whole_ && keep.whole_up_to > 0) max_frames_ = std::min(max_frames_, keep.whole_up_to);
  }

  // Allocates the windows (zeros) and places them: their first frames as
  // given, or from their timeline seconds once the stream's first sample's
  // time (`start_seconds`) is known. Call before the first Convert. With an
  // exact resampler (`grid`), the resampler starts at the aligned input
  // frame a pre-roll before the first window instead of at the stream's
  // start, and a count needs no resampling at all (TailCount).
  Failure Place(double start_seconds, int rate, const Grid& grid) {
    count_by_tail_ = keep_.count_only && grid.exact();
    if (whole_ || keep_.count_only) return {};
    const size_t n = static_cast<size_t>(keep_.n_windows);
    firsts_.resize(n);
    end_ = 0;
    for (size_t k = 0; k < n; ++k) {
      firsts_[k] = keep_.seconds != nullptr ? std::llround((keep_.seconds[k] - start_seconds) * rate) : keep_.first[k];
      end_ = std::max(end_, firsts_[k] + keep_.window_frames);
    }
    if (grid.exact() && n > 0) {
      const int64_t first = *std::min_element(firsts_.begin(), firsts_.end());
      const int64_t at = first <= 0 ? 0 : first / grid.out_step * grid.in_step;  // input frame of output `first`, or before
      resample_from_ = std::max<int64_t>(0, at - grid.preroll) / grid.in_step * grid.in_step;
      frames_ = resample_from_ / grid.in_step * grid.out_step;
    }
    try {
      kept_.assign(n * static_cast<size_t>(channels_) * static_cast<size_t>(keep_.window_frames), 0.0f);
    } catch (const std::bad_alloc&) {
      return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate %zu windows of %lld samples", n,
                  static_cast<long long>(keep_.window_frames));
    }
    return {};
  }

  // Appends what swr gives for `in` (null: the flush). Stops one sample past
  // the limit: swresample keeps the rest, and over() then stops the decode
  // before anything larger is allocated.
  Failure Convert(SwrContext* swr, const uint8_t** in, int in_count) {
    int room = swr_get_out_samples(swr, in_count);
    if (room < 0) return Fail(STOKER_MEDIA_CORRUPT, "the resampler failed: %s", AvError(room).c_str());
    room = static_cast<int>(std::min<int64_t>(room, std::max<int64_t>(0, max_frames_ + 1 - frames_)));
    std::vector<std::vector<float>>& into = whole_ ? planes_ : scratch_;
    const int64_t at = whole_ ? frames_ : 0;
    std::vector<uint8_t*> out(static_cast<size_t>(channels_));
    try {
      into.resize(static_cast<size_t>(channels_));
      for (int c = 0; c < channels_; ++c) {
        into[c].resize(static_cast<size_t>(at) + static_cast<size_t>(room));
        out[c] = reinterpret_cast<uint8_t*>(into[c].data() + at);
      }
    } catch (const std::bad_alloc&) {
      return Fail(STOKER_MEDIA_NO_MEMORY, "could not allocate %d more samples", room);
    }
    const int n = swr_convert(swr, out.data(), room, in, in_count);
    if (n < 0) return Fail(STOKER_MEDIA_CORRUPT, "the resampler failed: %s", AvError(n).c_str());
    if (!whole_) Keep(n);
    frames_ += n;
    if (whole_) {
      for (int c = 0; c < channels_; ++c) planes_[c].resize(static_cast<size_t>(frames_));
    }
    return {};
  }

  bool over() const { return frames_ > max_frames_; }
  // Whether decoded input still goes to the resampler, and from which input
  // frame on.
  bool wants_input() const { return !done() && !count_by_tail_; }
  int64_t resample_from() const { return resample_from_; }
  bool count_by_tail() const { return count_by_tail_; }
  void set_frames(int64_t frames) { frames_ = frames; }
  // Whole: the stream is longer than keep.whole_up_to (nothing is kept).
  bool longer() const { return whole_ && keep_.whole_up_to > 0 && frames_ > keep_.whole_up_to; }
  // Windows: every window is filled; what follows need not be resampled.
  bool done() const { return !whole_ && !keep_.count_only && !firsts_.empty() && frames_ >= end_; }
  int64_t frames() const { return frames_; }
  std::vector<std::vector<float>> TakePlanes() { return std::move(planes_); }
  std::vector<float> TakeKept() { return std::move(kept_); }

 private:
  // Copies the scratch's n frames (stream frames [frames_, frames_ + n))
  // into the windows they fall in.
  void Keep(int n) {
    const int64_t window = keep_.window_frames;
    for (size_t k = 0; k < firsts_.size(); ++k) {
      const int64_t from = std::max(frames_, firsts_[k]), to = std::min(frames_ + n, firsts_[k] + window);
      if (from >= to) continue;
      for (int c = 0; c < channels_; ++c) {
        float* row = kept_.data() + (static_cast<int64_t>(k) * channels_ + c) * window;
        std::copy(scratch_[c].begin() + (from - frames_), scratch_[c].begin() + (to - frames_), row + (from - firsts_[k]));
      }
    }
  }

  int channels_;
  int64_t max_frames_;
  const StokerAudioKeep keep_;
  const bool whole_;  // the whole stream is kept (not a count, not windows)
  int64_t frames_ = 0;
  std::vector<std::vector<float>> planes_;   // whole: the stream
  std::vector<std::vector<float>> scratch_;  // windows, count: one Convert's output
  std::vector<int64_t> firsts_;              // windows: each one's first frame
  int64_t end_ = 0;                          // windows: the frame after the last one
  bool count_by_tail_ = false;               // count: from the input's length (TailCount)
  int64_t resample_from_ = 0;                // the first input frame the resampler sees
  std::vector<float> kept_;                  // windows: K x C x L
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

// One decode: the container and its audio stream, the decoder, the
// resampler made at the first frame (to the request's rate and channels),
// and the output it fills. Open chooses and checks the stream; Read decodes
// every packet (a decode error is judged by what follows it); Finish checks
// the length and hands the result over.
class AudioDecode {
 public:
  AudioDecode(const uint8_t* data, size_t size, const StokerAudioRequest& request, const StokerAudioKeep& keep)
      : data_(data),
        size_(size),
        request_(request),
        keep_(keep) {}

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
    return Fail(STOKER_MEDIA_TOO_LARGE, "the audio stream announces %.1f s; at most %.1f s are decoded (--max-media-seconds)",
                announced_, request_.max_seconds);
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
  if (err < 0) return Fail(STOKER_MEDIA_CORRUPT, "the %s decoder does not open: %s", codec_->name, AvError(err).c_str());
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
    if (output_->longer()) return Fail(STOKER_MEDIA_LONGER, "longer than %lld frames", static_cast<long long>(keep_.whole_up_to));
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
    if (Failure f = TailCount(in_frames_, in_rate_, request_.rate, grid_, &counted); f.code != STOKER_MEDIA_OK) return f;
    output_->set_frames(counted);
  }
  if (output_->longer()) return Fail(STOKER_MEDIA_LONGER, "longer than %lld frames", static_cast<long long>(keep_.whole_up_to));
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

__attribute__((visibility("default"))) int stoker_media_decode_audio_kept(
    const uint8_t* data, size_t size, const StokerAudioRequest* request, const StokerAudioKeep* keep, float** samples,
    int64_t* frames, double* start_seconds, char* error, size_t error_size) {
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
