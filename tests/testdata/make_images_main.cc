// stoker-make-images: writes a synthetic ImageFolder tree of JPEGs for demos
// and tests.
#include <cstdio>

#include "absl/flags/flag.h"
#include "common/flag_names.h"
#include "tests/testdata/image_set.h"

ABSL_FLAG(std::string, out, "", "Directory to create the ImageFolder tree in");
ABSL_FLAG(int, classes, 4, "Number of class directories");
ABSL_FLAG(int, per_class, 16, "Images per class");
ABSL_FLAG(int, min_side, 200, "Smallest image side in pixels");
ABSL_FLAG(int, max_side, 500, "Largest image side in pixels");
ABSL_FLAG(uint64_t, seed, 1, "Seed; the same seed writes the same files");

int main(int argc, char** argv) {
  stoker::ParseFlags(argc, argv, "Writes a synthetic ImageFolder tree: stoker-make-images --out DIR");
  if (absl::GetFlag(FLAGS_out).empty()) {
    std::fprintf(stderr, "stoker-make-images: --out is required\n");
    return 2;
  }
  stoker::testing::ImageSetOptions o;
  o.classes = absl::GetFlag(FLAGS_classes);
  o.per_class = absl::GetFlag(FLAGS_per_class);
  o.min_side = absl::GetFlag(FLAGS_min_side);
  o.max_side = absl::GetFlag(FLAGS_max_side);
  o.seed = absl::GetFlag(FLAGS_seed);
  if (absl::Status s = stoker::testing::WriteImageFolder(absl::GetFlag(FLAGS_out), o); !s.ok()) {
    std::fprintf(stderr, "stoker-make-images: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("wrote %d images in %d classes to %s\n", o.classes * o.per_class, o.classes,
              absl::GetFlag(FLAGS_out).c_str());
  return 0;
}
