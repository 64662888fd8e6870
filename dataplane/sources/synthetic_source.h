// A dataset with no storage behind it: `synthetic:WIDTHxHEIGHT[:SAMPLES[:CLASSES]]`
// serves in-memory JPEGs of that size (16 distinct images, generated at open)
// with labels index % CLASSES. Reading costs no I/O, so a run against it shows
// the ceiling of everything after the read stage (decode, augment, transport).
// Thread-safe; immutable after Parse.
#ifndef STOKER_DATAPLANE_SOURCES_SYNTHETIC_SOURCE_H_
#define STOKER_DATAPLANE_SOURCES_SYNTHETIC_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dataplane/sample/sample_source.h"

namespace stoker {

inline constexpr absl::string_view kSyntheticPrefix = "synthetic:";

class SyntheticSource final : public SampleSource {
 public:
  // INVALID_ARGUMENT names what does not parse; sizes 1..8192, samples
  // 1..1e9 (default 10000), classes 1..1e6 (default 1000).
  static absl::StatusOr<std::shared_ptr<const SyntheticSource>> Open(absl::string_view name);

  int64_t size() const override { return samples_; }
  const std::vector<std::string>& class_names() const override { return class_names_; }
  int32_t label(int64_t index) const override { return static_cast<int32_t>(index % classes_); }
  std::string Describe(int64_t index) const override;
  absl::StatusOr<std::string> Read(int64_t index) const override;
  const std::string& fingerprint() const override { return fingerprint_; }

 private:
  SyntheticSource() = default;
  int64_t samples_ = 0;
  int32_t classes_ = 0;
  std::vector<std::string> class_names_;
  std::vector<std::string> images_;  // encoded JPEGs
  std::string fingerprint_;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SOURCES_SYNTHETIC_SOURCE_H_
