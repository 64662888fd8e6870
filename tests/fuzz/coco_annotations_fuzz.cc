// The COCO annotation parser and mask makers: any bytes as an instances
// file, then every sample's targets with masks and keypoints. Must never
// crash, hang, or allocate without bound (polygons far outside their image,
// RLE counts that do not fill the mask, images of 65535 x 65535).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "dataplane/fields/coco_masks.h"
#include "dataplane/sources/coco_source.h"

namespace {

const std::filesystem::path& Dir() {
  static const auto* dir = [] {
    auto* d = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                        ("stoker_coco_fuzz_" + std::to_string(getpid())));
    std::filesystem::create_directories(*d);
    return d;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // The compressed RLE decoder on its own, on the raw bytes.
  (void)stoker::DecodeCompressedRuns(bytes, 7, 5);
  const std::filesystem::path file = Dir() / "instances.json";
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  auto source = stoker::CocoSource::Open(Dir(), file, 1 << 20, 1 << 20);
  if (!source.ok()) return 0;
  for (int64_t i = 0; i < (*source)->size() && i < 16; ++i) {
    stoker::SampleTargets targets;
    if ((*source)->ReadTargets(i, {true, true, true}, &targets).ok()) {
      if (targets.boxes.size() != 4 * targets.labels.size()) __builtin_trap();
      for (const auto& m : targets.instance_masks) {
        if (m.empty() || m.type() != CV_8U) __builtin_trap();
      }
    }
  }
  return 0;
}
