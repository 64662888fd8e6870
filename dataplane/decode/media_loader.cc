#include "dataplane/decode/media_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "glog/logging.h"

namespace stoker {
namespace {

// The module of a build (FFmpeg of the build machine), then those the
// packages carry, libstoker_media_ffmpeg<N>.so, one per FFmpeg major version
// N, newest first: each loads only where the host has that FFmpeg's libraries.
constexpr const char* kBuildModule = "libstoker_media.so";
constexpr const char* kPackagedPrefix = "libstoker_media_ffmpeg";

constexpr const char* kInstallHint =
    "audio and video decoding needs the host's FFmpeg libraries of a major version this installation has a "
    "module for (the packages: FFmpeg 7.1+ as libavformat61, FFmpeg 5 as libavformat59), and none could be "
    "loaded; install one, e.g. `apt install libavformat61 libavcodec61 libswscale8 libswresample5` (Debian 13) or "
    "`apt install libavformat59 libavcodec59 libswscale6 libswresample4` (Debian 12), or, for another FFmpeg "
    "(Ubuntu 22.04's 4.4, 24.04's 6.1), build libstoker_media.so from the Stoker sources against it and point "
    "STOKER_MEDIA_MODULE at it. Tried: ";

// The packaged modules in `dir`, newest FFmpeg first.
std::vector<std::filesystem::path> PackagedModules(const std::filesystem::path& dir) {
  std::vector<std::pair<int, std::filesystem::path>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int major = 0;
    if (absl::StartsWith(name, kPackagedPrefix) && absl::EndsWith(name, ".so") &&
        absl::SimpleAtoi(
            absl::string_view(name).substr(strlen(kPackagedPrefix), name.size() - strlen(kPackagedPrefix) - 3),
            &major)) {
      found.emplace_back(major, entry.path());
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::filesystem::path> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

// Folders searched: beside the library (or program) that holds this code,
// beside the running program.
std::vector<std::string> Candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("STOKER_MEDIA_MODULE")) out.push_back(env);
  std::vector<std::filesystem::path> dirs;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&Candidates), &info) != 0 && info.dli_fname != nullptr) {
    dirs.push_back(std::filesystem::path(info.dli_fname).parent_path());
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && (dirs.empty() || exe.parent_path() != dirs.front())) dirs.push_back(exe.parent_path());
  for (const auto& dir : dirs) {
    bool any = false;
    if (std::filesystem::exists(dir / kBuildModule, ec)) out.push_back((dir / kBuildModule).string()), any = true;
    for (const auto& path : PackagedModules(dir)) out.push_back(path.string()), any = true;
    if (!any) out.push_back((dir / kBuildModule).string());  // named in the error: "no such file"
  }
  return out;
}

struct Loaded {
  MediaApi api;
  bool ok = false;
  std::string error;
};

const Loaded& Load() {
  static const Loaded* loaded = [] {
    auto* l = new Loaded();
    std::string tried;
    for (const std::string& path : Candidates()) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        tried += (tried.empty() ? "" : "; ") + path + ": " + dlerror();
        continue;
      }
      l->api.decode_audio =
          reinterpret_cast<decltype(l->api.decode_audio)>(dlsym(handle, "stoker_media_decode_audio_kept"));
      l->api.video_index = reinterpret_cast<decltype(l->api.video_index)>(dlsym(handle, "stoker_media_video_index"));
      l->api.video_frames = reinterpret_cast<decltype(l->api.video_frames)>(dlsym(handle, "stoker_media_video_frames"));
      l->api.video_frames_each =
          reinterpret_cast<decltype(l->api.video_frames_each)>(dlsym(handle, "stoker_media_video_frames_each"));
      l->api.free = reinterpret_cast<decltype(l->api.free)>(dlsym(handle, "stoker_media_free"));
      l->api.version = reinterpret_cast<decltype(l->api.version)>(dlsym(handle, "stoker_media_version"));
      if (l->api.decode_audio && l->api.video_index && l->api.video_frames && l->api.video_frames_each && l->api.free &&
          l->api.version) {
        l->ok = true;
        LOG(INFO) << "media decoding: " << path << " (" << l->api.version() << ")";
        return l;
      }
      tried += (tried.empty() ? "" : "; ") + path + ": lacks the stoker_media functions";
      l->api = MediaApi();
    }
    l->error = kInstallHint + tried;
    return l;
  }();
  return *loaded;
}

}  // namespace

const MediaApi* LoadMediaModule(std::string* error) {
  const Loaded& l = Load();
  if (l.ok) return &l.api;
  if (error != nullptr) *error = l.error;
  return nullptr;
}

absl::Status MediaStatus(int result, const char* error, const char* what) {
  switch (result) {
    case STOKER_MEDIA_OK: return absl::OkStatus();
    case STOKER_MEDIA_EMPTY: return DecodeError(DecodeFailure::kEmpty, error);
    case STOKER_MEDIA_TRUNCATED: return DecodeError(DecodeFailure::kTruncated, error);
    case STOKER_MEDIA_TOO_LARGE: return DecodeError(DecodeFailure::kTooLarge, error);
    case STOKER_MEDIA_UNSUPPORTED: return DecodeError(DecodeFailure::kUnsupported, error);
    case STOKER_MEDIA_NO_MEMORY:
      return absl::ResourceExhaustedError(absl::StrCat("out of memory while ", what, ": ", error));
    case STOKER_MEDIA_TIMEOUT:  // a timer: the batch fails as retryable, the sample is not replaced
      return TimerError(absl::StrCat(what, ": ", error, " (the media wall-clock bound)"));
    default: return DecodeError(DecodeFailure::kCorrupt, error);
  }
}

}  // namespace stoker
