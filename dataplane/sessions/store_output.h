// Materialising sessions (SessionConfig.store in stoker.proto): the server
// runs a deterministic prefix and sends each sample encoded as a
// materialised dataset stores it, so that stoker-materialize --servers makes
// the same shards as local workers. Pure functions; thread-safe.
#ifndef STOKER_DATAPLANE_SESSIONS_STORE_OUTPUT_H_
#define STOKER_DATAPLANE_SESSIONS_STORE_OUTPUT_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/sample/sample_source.h"
#include "dataplane/sample/stored_sample.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// Validates a config with `store` set: batch size, no dtype, layout or cache
// mode, a deterministic prefix (a random op named), a format and compression
// that parse, float pixels (normalize last) stored raw only. INVALID_ARGUMENT
// names the field. Sets *format.
absl::StatusOr<Pipeline> StorePipeline(const v1::SessionConfig& config, StoredFormat* format);

// One sample: `encoded` (an image file's bytes) decoded, the prefix applied,
// normalised if it ends in normalize, and encoded as stored. The
// materialiser's local workers and a server's materialising session both
// use it, so their shards are byte-identical. Decode errors carry a
// DecodeFailure (image_decoder.h). times->augment includes the encoding.
absl::StatusOr<std::string> MakeStoredSample(const Pipeline& prefix, const StoredFormat& format,
                                             absl::string_view encoded, int64_t max_pixels, SampleTimes* times);

// The sample's fields as a materialised copy stores them: each member
// source.FieldMembers names whose extension IsStorableField allows, read
// whole, in the sample's order. A member that cannot be read fails the
// sample (the error names it); members with reserved names are left out
// and counted in *dropped (may be null).
absl::StatusOr<std::vector<StoredField>> ReadStoredFields(const SampleSource& source, int64_t index,
                                                          const StoredFormat& format, std::atomic<int64_t>* dropped);

// A guess at one stored sample's bytes, for the server's in-flight budget
// (the real size is known only once made): exact after a center_crop, a 4:3
// image after a resize, 1024 x 768 pixels for decoded pixels, as raw pixels.
int64_t EstimatedStoredBytes(const Pipeline& prefix);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SESSIONS_STORE_OUTPUT_H_
