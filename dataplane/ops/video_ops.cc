#include "dataplane/ops/video_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "dataplane/ops/op_registry.h"

namespace stoker {

absl::Status CheckVideoClipRules(const std::string& where, const v1::VideoClip& clip) {
  if (!v1::VideoClip::Mode_IsValid(clip.mode())) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".video_clip.mode: random or uniform"));
  }
  return absl::OkStatus();
}

absl::Status CheckVideoClip(const std::string& where, v1::VideoClip& clip) {
  return CheckOpBody(v1::Op::kVideoClip, where, clip);
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
