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
  return CheckVideoClip(where, *op.mutable_video_clip());
}

absl::Status CheckAudioOp(const std::string& where, v1::Op& op, OpShape*) {
  return CheckAudio(where, *op.mutable_audio());
}

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
  static const auto* ops = new std::vector<OpEntry>{
      {v1::Op::kVideoClip, "none (torchvision.io.read_video + clip sampling)", CheckClip, ClipIsRandom, nullptr, kNone,
       nullptr},
      {v1::Op::kAudio, "torchaudio.load + transforms.Resample (libswresample), a window", CheckAudioOp, AudioIsRandom,
       nullptr, kNone, nullptr},
      // f_min and f_max are two arguments, as torchaudio names them, not one range f=lo:hi.
      {v1::Op::kMelSpectrogram, "torchaudio.transforms.MelSpectrogram (+ AmplitudeToDB with log)", CheckMelAlone, Never,
       nullptr, kNone, nullptr,
       OpText{{{"n_fft", "n_fft"},
               {"hop", "hop"},
               {"n_mels", "n_mels"},
               {"f_min", "f_min"},
               {"f_max", "f_max"},
               {"log", "log"}}}},
  };
  return *ops;
}

}  // namespace stoker
