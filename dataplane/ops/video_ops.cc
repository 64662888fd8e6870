#include "dataplane/ops/video_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace stoker {

absl::Status CheckVideoClip(const std::string& where, v1::VideoClip& clip) {
  if (clip.frames() == 0) clip.set_frames(8);
  if (clip.stride() == 0) clip.set_stride(1);
  if (clip.clips() == 0) clip.set_clips(1);
  auto range = [&](const char* name, int value, int lo, int hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".video_clip.", name, " = ", value, "; allowed range is ", lo, "..", hi));
  };
  if (clip.frames() < 1 || clip.frames() > 512) return range("frames", clip.frames(), 1, 512);
  if (clip.stride() < 1 || clip.stride() > 1000) return range("stride", clip.stride(), 1, 1000);
  if (clip.clips() < 1 || clip.clips() > 64) return range("clips", clip.clips(), 1, 64);
  // The audio track's (0: its default, filled in when a field asks for the track).
  if (clip.audio_rate() != 0 && (clip.audio_rate() < 1000 || clip.audio_rate() > 384000)) {
    return range("audio_rate", clip.audio_rate(), 1000, 384000);
  }
  if (clip.audio_channels() != 0 && (clip.audio_channels() < 1 || clip.audio_channels() > 8)) {
    return range("audio_channels", clip.audio_channels(), 1, 8);
  }
  if (!v1::VideoClip::Mode_IsValid(clip.mode())) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".video_clip.mode: random or uniform"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> ClipFrames(const v1::VideoClip& clip, int64_t frames, Rng& rng) {
  const int64_t span = int64_t{clip.frames() - 1} * clip.stride() + 1;
  const int64_t room = std::max<int64_t>(0, frames - span);  // the last possible start
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(clip.clips()) * static_cast<size_t>(clip.frames()));
  for (int k = 0; k < clip.clips(); ++k) {
    int64_t start;
    if (clip.mode() == v1::VideoClip::RANDOM) {
      start = rng.UniformInt(0, room);
    } else if (clip.clips() == 1) {
      start = room / 2;
    } else {
      start =
          static_cast<int64_t>(std::llround(static_cast<double>(k) * static_cast<double>(room) / (clip.clips() - 1)));
    }
    for (int t = 0; t < clip.frames(); ++t) {
      out.push_back(std::min(frames - 1, start + int64_t{t} * clip.stride()));
    }
  }
  return out;
}

}  // namespace stoker
