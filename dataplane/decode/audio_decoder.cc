#include "dataplane/decode/audio_decoder.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/media_loader.h"

namespace stoker {

absl::StatusOr<Waveform> DecodeAudio(absl::string_view bytes, const AudioDecodeOptions& options) {
  if (bytes.empty()) return DecodeError(DecodeFailure::kEmpty, "zero bytes");
  std::string why;
  const MediaApi* api = LoadMediaModule(&why);
  if (api == nullptr) return absl::FailedPreconditionError(why);
  StokerAudioRequest request{options.rate, options.channels, options.max_seconds, options.max_wall_seconds};
  float* samples = nullptr;
  int64_t frames = 0;
  char error[512] = "";
  Waveform w;
  const int r = api->decode_audio(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &request, &samples,
                                  &frames, &w.start_seconds, error, sizeof(error));
  if (r != STOKER_MEDIA_OK) return MediaStatus(r, error, "decoding audio");
  w.rate = options.rate;
  w.channels = options.channels;
  w.frames = frames;
  w.samples.assign(samples, samples + frames * options.channels);
  api->free(samples);
  return w;
}

}  // namespace stoker
