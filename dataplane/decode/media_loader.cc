#include "dataplane/decode/media_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "glog/logging.h"

namespace stoker {
namespace {

// The module of a build (FFmpeg of the build machine), then those the
// packages carry, one per FFmpeg major version, newest first: each loads
// only where the host has that FFmpeg's libraries.
constexpr const char* kModules[] = {"libstoker_media.so", "libstoker_media_ffmpeg7.so",
                                    "libstoker_media_ffmpeg6.so", "libstoker_media_ffmpeg5.so"};

constexpr const char* kInstallHint =
    "audio and video decoding needs the host's FFmpeg libraries, version 7 (libavformat61) or 5 "
    "(libavformat59), and none could be loaded; install them, e.g. `apt install libavformat61 libavcodec61 "
    "libswscale8 libswresample5` (Debian 13, Ubuntu 24.10+) or `apt install libavformat59 libavcodec59 "
    "libswscale6 libswresample4` (Debian 12, Ubuntu 22.04: libavformat58 is FFmpeg 4, not supported), or "
    "point STOKER_MEDIA_MODULE at a libstoker_media.so built against the host's FFmpeg. Tried: ";

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
    for (const char* module : kModules) {
      const std::filesystem::path path = dir / module;
      if (std::filesystem::exists(path, ec)) out.push_back(path.string()), any = true;
    }
    if (!any) out.push_back((dir / kModules[0]).string());  // named in the error: "no such file"
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
      l->api.video_index =
          reinterpret_cast<decltype(l->api.video_index)>(dlsym(handle, "stoker_media_video_index"));
      l->api.video_frames =
          reinterpret_cast<decltype(l->api.video_frames)>(dlsym(handle, "stoker_media_video_frames"));
      l->api.video_frames_each =
          reinterpret_cast<decltype(l->api.video_frames_each)>(dlsym(handle, "stoker_media_video_frames_each"));
      l->api.free = reinterpret_cast<decltype(l->api.free)>(dlsym(handle, "stoker_media_free"));
      l->api.version = reinterpret_cast<decltype(l->api.version)>(dlsym(handle, "stoker_media_version"));
      if (l->api.decode_audio && l->api.video_index && l->api.video_frames && l->api.video_frames_each &&
          l->api.free && l->api.version) {
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
    case STOKER_MEDIA_OK:
      return absl::OkStatus();
    case STOKER_MEDIA_EMPTY:
      return DecodeError(DecodeFailure::kEmpty, error);
    case STOKER_MEDIA_TRUNCATED:
      return DecodeError(DecodeFailure::kTruncated, error);
    case STOKER_MEDIA_TOO_LARGE:
      return DecodeError(DecodeFailure::kTooLarge, error);
    case STOKER_MEDIA_UNSUPPORTED:
      return DecodeError(DecodeFailure::kUnsupported, error);
    case STOKER_MEDIA_NO_MEMORY:
      return absl::ResourceExhaustedError(absl::StrCat("out of memory while ", what, ": ", error));
    default:
      return DecodeError(DecodeFailure::kCorrupt, error);
  }
}

}  // namespace stoker
