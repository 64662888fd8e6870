// Which files hold which media, by name: the extensions a class-per-folder
// tree is scanned for and a field's members are checked against. Immutable
// sets; thread-safe.
#ifndef STOKER_DATAPLANE_DECODE_FILE_KINDS_H_
#define STOKER_DATAPLANE_DECODE_FILE_KINDS_H_

#include <set>
#include <string>

namespace stoker {

// torchvision.datasets.folder.IMG_EXTENSIONS (lower case, with the dot).
const std::set<std::string>& ImageExtensions();
// Audio files a class-per-folder tree may hold instead of images: .wav,
// .flac, .mp3, .ogg, .opus, .m4a, .aac, .aiff, .aif (lower case, with the dot).
const std::set<std::string>& AudioExtensions();
// Video files such a tree may hold: .mp4, .m4v, .mov, .mkv, .webm, .avi.
const std::set<std::string>& VideoExtensions();

}  // namespace stoker

#endif  // STOKER_DATAPLANE_DECODE_FILE_KINDS_H_
