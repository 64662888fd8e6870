// libstoker_media.so's audio output (media_audio.cc): the resampler's grid,
// a count by the tail of the input, and Output, which keeps the resampled
// stream whole, its length only, or windows of it. Internal to the media
// module; value types; thread-compatible.
#ifndef STOKER_DATAPLANE_DECODE_MEDIA_AUDIO_OUTPUT_H_
#define STOKER_DATAPLANE_DECODE_MEDIA_AUDIO_OUTPUT_H_

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dataplane/decode/media_abi.h"

extern "C" {
#include <libavutil/frame.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>
}

#include "dataplane/decode/media_internal.h"

namespace stoker_media {
namespace audio_output {

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

inline Grid GridOf(SwrContext* swr, int in_rate, int out_rate) {
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
inline Failure TailCount(int64_t in_frames, int in_rate, int out_rate, const Grid& grid, int64_t* frames) {
  const int64_t margin = 8192 + 2 * grid.preroll;
  const int64_t s = std::max<int64_t>(0, in_frames - margin) / grid.in_step * grid.in_step;
  AVChannelLayout mono{};
  av_channel_layout_default(&mono, 1);
  SwrContext* raw = nullptr;
  if (swr_alloc_set_opts2(&raw, &mono, AV_SAMPLE_FMT_FLT, out_rate, &mono, AV_SAMPLE_FMT_FLT, in_rate, 0, nullptr) <
          0 ||
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
inline void SamplesFrom(const AVFrame* frame, int channels, int64_t skip, std::vector<const uint8_t*>* out) {
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
      const int64_t at =
          first <= 0 ? 0 : first / grid.out_step * grid.in_step;  // input frame of output `first`, or before
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
        std::copy(scratch_[c].begin() + (from - frames_), scratch_[c].begin() + (to - frames_),
                  row + (from - firsts_[k]));
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

}  // namespace audio_output
}  // namespace stoker_media

#endif  // STOKER_DATAPLANE_DECODE_MEDIA_AUDIO_OUTPUT_H_
