#include "dataplane/sample/sample_source.h"

#include <xxhash.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "dataplane/decode/image_decoder.h"

namespace stoker {

std::vector<int64_t> SampleSource::ShardSizes() const {
  std::vector<int64_t> sizes;
  for (int64_t left = size(); left > 0; left -= kShardBlockSamples) sizes.push_back(std::min(left, kShardBlockSamples));
  return sizes;
}

absl::Status SampleSource::ReadTargets(int64_t index, const TargetNeeds&, SampleTargets*) const {
  return DecodeError(
      DecodeFailure::kMissingField,
      absl::StrCat(Describe(index), " has no annotations: this dataset has no boxes, masks or keypoints"));
}

absl::StatusOr<std::string> SampleSource::ReadField(int64_t index, const std::vector<std::string>& extensions,
                                                    std::string* which, int64_t) const {
  (void)which;
  return DecodeError(DecodeFailure::kMissingField,
                     absl::StrCat(Describe(index), " has no member ", absl::StrJoin(extensions, " or "),
                                  ": this dataset's samples have no fields but the image and its class"));
}

FingerprintBuilder::FingerprintBuilder() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

FingerprintBuilder::~FingerprintBuilder() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

FingerprintBuilder& FingerprintBuilder::Add(absl::string_view part) {
  // Length first, so that ("ab", "c") and ("a", "bc") differ.
  Add(static_cast<int64_t>(part.size()));
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), part.data(), part.size());
  return *this;
}

FingerprintBuilder& FingerprintBuilder::Add(int64_t value) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), &value, sizeof(value));
  return *this;
}

std::string FingerprintBuilder::Finish() {
  return absl::StrFormat("xxh3:%016x", XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)));
}

}  // namespace stoker
