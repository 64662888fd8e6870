#include "dataplane/decode/file_kinds.h"

namespace stoker {

const std::set<std::string>& ImageExtensions() {
  static const auto* ext =
      new std::set<std::string>{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
  return *ext;
}

const std::set<std::string>& AudioExtensions() {
  static const auto* ext =
      new std::set<std::string>{".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".aac", ".aiff", ".aif"};
  return *ext;
}

const std::set<std::string>& VideoExtensions() {
  static const auto* ext = new std::set<std::string>{".mp4", ".m4v", ".mov", ".mkv", ".webm", ".avi"};
  return *ext;
}

}  // namespace stoker
