// Where a dataset's samples come from: an ImageFolder tree, WebDataset-style
// tar shards, or a synthetic source. A source is immutable once opened and
// shared by every session reading the dataset; all methods are thread-safe.
#ifndef STOKER_SERVER_SAMPLE_SOURCE_H_
#define STOKER_SERVER_SAMPLE_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace stoker {

class SampleSource {
 public:
  virtual ~SampleSource() = default;

  virtual int64_t size() const = 0;
  // Label i is class_names()[i].
  virtual const std::vector<std::string>& class_names() const = 0;
  virtual int32_t label(int64_t index) const = 0;
  // Where the sample lives, for logs and FailedSample.path: a path relative
  // to the dataset, or "shard.tar:member".
  virtual std::string Describe(int64_t index) const = 0;
  // The sample's encoded bytes. Errors name the file.
  virtual absl::StatusOr<std::string> Read(int64_t index) const = 0;
};

}  // namespace stoker

#endif  // STOKER_SERVER_SAMPLE_SOURCE_H_
