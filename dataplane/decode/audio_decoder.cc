#include "dataplane/decode/audio_decoder.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/media_loader.h"

namespace stoker {
namespace {

// One call of the module: its samples (copied out) and the stream's length.
struct Decoded {
  int result = STOKER_MEDIA_OK;
  std::vector<float> samples;
  int64_t frames = 0;
  double start_seconds = 0;
};

absl::StatusOr<Decoded> Call(absl::string_view bytes, const AudioDecodeOptions& options, int channels,
                             const StokerAudioKeep& keep, size_t expected) {
  if (bytes.empty()) return DecodeError(DecodeFailure::kEmpty, "zero bytes");
  std::string why;
  const MediaApi* api = LoadMediaModule(&why);
  if (api == nullptr) return absl::FailedPreconditionError(why);
  StokerAudioRequest request{options.rate, channels, options.max_seconds, options.max_wall_seconds};
  float* samples = nullptr;
  char error[512] = "";
  Decoded d;
  d.result = api->decode_audio(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &request, &keep, &samples,
                               &d.frames, &d.start_seconds, error, sizeof(error));
  if (d.result == STOKER_MEDIA_LONGER) return d;
  if (d.result != STOKER_MEDIA_OK) return MediaStatus(d.result, error, "decoding audio");
  const size_t n = expected > 0 ? expected : static_cast<size_t>(d.frames) * static_cast<size_t>(channels);
  try {
    if (keep.count_only == 0) d.samples.assign(samples, samples + n);
  } catch (const std::bad_alloc&) {
    api->free(samples);
    return absl::ResourceExhaustedError(absl::StrCat("out of memory while decoding audio: ", n, " samples"));
  }
  api->free(samples);
  return d;
}

}  // namespace

absl::StatusOr<Waveform> DecodeAudio(absl::string_view bytes, const AudioDecodeOptions& options) {
  StokerAudioKeep whole{};
  absl::StatusOr<Decoded> d = Call(bytes, options, options.channels, whole, 0);
  if (!d.ok()) return d.status();
  Waveform w;
  w.rate = options.rate;
  w.channels = options.channels;
  w.frames = d->frames;
  w.samples = std::move(d->samples);
  w.start_seconds = d->start_seconds;
  return w;
}

absl::StatusOr<std::vector<float>> DecodeAudioCrop(absl::string_view bytes, const AudioDecodeOptions& options,
                                                   int64_t window, const std::function<int64_t(int64_t)>& choose) {
  const int channels = options.channels;
  StokerAudioKeep keep{};
  keep.whole_up_to = std::max<int64_t>(window, kWholeAudioBytes / (4 * channels));
  absl::StatusOr<Decoded> d = Call(bytes, options, channels, keep, 0);
  if (!d.ok()) return d.status();
  if (d->result == STOKER_MEDIA_OK) {  // whole: cut here
    const int64_t frames = d->frames, start = choose(frames),
                  n = std::max<int64_t>(0, std::min(window, frames - start));
    std::vector<float> out(static_cast<size_t>(channels * window), 0.0f);
    for (int c = 0; c < channels; ++c) {
      const float* src = d->samples.data() + static_cast<int64_t>(c) * frames + start;
      std::copy(src, src + n, out.data() + static_cast<int64_t>(c) * window);
    }
    return out;
  }
  StokerAudioKeep count{};
  count.count_only = 1;
  absl::StatusOr<Decoded> counted = Call(bytes, options, /*channels=*/1, count, 0);
  if (!counted.ok()) return counted.status();
  const int64_t start = choose(counted->frames);
  StokerAudioKeep one{};
  one.n_windows = 1;
  one.window_frames = window;
  one.first = &start;
  absl::StatusOr<Decoded> cut = Call(bytes, options, channels, one, static_cast<size_t>(channels * window));
  if (!cut.ok()) return cut.status();
  return std::move(cut->samples);
}

absl::StatusOr<std::vector<float>> DecodeAudioWindows(absl::string_view bytes, const AudioDecodeOptions& options,
                                                      const std::vector<double>& starts, int64_t window) {
  if (starts.empty()) return std::vector<float>();
  StokerAudioKeep keep{};
  keep.n_windows = static_cast<int>(starts.size());
  keep.window_frames = window;
  keep.seconds = starts.data();
  absl::StatusOr<Decoded> d =
      Call(bytes, options, options.channels, keep, starts.size() * static_cast<size_t>(options.channels * window));
  if (!d.ok()) return d.status();
  return std::move(d->samples);
}

}  // namespace stoker
