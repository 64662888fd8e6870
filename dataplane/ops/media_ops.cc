// The ops that make audio and video samples, as registered ops
// (op_registry.h): video_clip (decoded by Pipeline::ProduceVideo,
// pipeline_media.cc; the image ops after it run on each frame), audio and
// mel_spectrogram (AudioPipeline, audio_ops.h, which checks an audio
// pipeline as a whole: mel_spectrogram's bounds depend on audio's rate).
// They have no `apply`: no image goes through them.
#include "absl/strings/str_cat.h"
#include "dataplane/ops/audio_ops.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/video_ops.h"

namespace stoker {
namespace {

// Each frame keeps the video's size.
absl::Status CheckClip(const std::string& where, v1::Op& op, OpShape*) {
  return CheckVideoClipRules(where, op.video_clip());
}

absl::Status CheckAudioOp(const std::string& where, v1::Op& op, OpShape*) { return CheckAudioRules(where, op.audio()); }

// Never runs today (an audio pipeline is checked whole, and a prefix refuses
// media ops): mel_spectrogram has no check of its own.
absl::Status CheckMelAlone(const std::string& where, v1::Op&, OpShape*) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ".mel_spectrogram follows audio(...) in an audio pipeline: its bins depend on audio's rate"));
}

bool ClipIsRandom(const v1::Op& op) { return op.video_clip().mode() == v1::VideoClip::RANDOM; }
bool AudioIsRandom(const v1::Op& op) { return op.audio().crop() == v1::Audio::RANDOM; }
bool Never(const v1::Op&) { return false; }

}  // namespace

const std::vector<OpEntry>& MediaOps() {
  constexpr OpTargets kNone = OpTargets::kNone;
  static const auto* ops = [] {
    auto* entries = new std::vector<OpEntry>{
        // The audio track's rate and channels: 0, their default, is filled in
        // when a field asks for the track (pipeline_media.cc).
        WithParams({{"frames", 1, 512, 8},
                    {"stride", 1, 1000, 1},
                    {"clips", 1, 64, 1},
                    {"audio_rate", kMinAudioRate, kMaxAudioRate, 0, "Hz"},
                    {"audio_channels", 1, kMaxAudioChannels, 0}},
                   OnlyFirst("it decodes the sample's video into clips",
                             {v1::Op::kVideoClip, "none (torchvision.io.read_video + clip sampling)", CheckClip,
                              ClipIsRandom, nullptr, kNone, nullptr})),
        WithParams({{"rate", kMinAudioRate, kMaxAudioRate, 16000, "Hz"},
                    {"channels", 1, kMaxAudioChannels, 1},
                    {"seconds", 0, kMaxAudioSeconds, 4, "s", true}},
                   {v1::Op::kAudio, "torchaudio.load + transforms.Resample (libswresample), a window", CheckAudioOp,
                    AudioIsRandom, nullptr, kNone, nullptr}),
        // f_min and f_max are two arguments, as torchaudio names them, not one range f=lo:hi.
        // Its n_fft is declared for the reference; AudioPipeline checks it with the rest (MelSpectrogram::Check).
        WithParams({{"n_fft", kMinFft, kMaxFft, kDefaultFft}},
                   {v1::Op::kMelSpectrogram, "torchaudio.transforms.MelSpectrogram (+ AmplitudeToDB with log)",
                    CheckMelAlone, Never, nullptr, kNone, nullptr,
                    OpText{{{"n_fft", "n_fft"},
                            {"hop", "hop"},
                            {"n_mels", "n_mels"},
                            {"f_min", "f_min"},
                            {"f_max", "f_max"},
                            {"log", "log"}}}}),
    };
    // They make their samples themselves, from the encoded file: no prefix of them is stored.
    for (OpEntry& e : *entries) e.rules.prefix_why = "audio and video pipelines are not materialised";
    return entries;
  }();
  return *ops;
}

}  // namespace stoker
