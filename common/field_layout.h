// The field region of a batch (stoker.proto: BatchHeader.field_bytes and
// FieldData): building it from each sample's values on the producing side,
// and checking a received header's layout before any of it is trusted.
// Pure functions; thread-safe.
#ifndef STOKER_COMMON_FIELD_LAYOUT_H_
#define STOKER_COMMON_FIELD_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// The session's fields other than the image, in order: those a batch's
// FieldData lists.
std::vector<v1::FieldSpec> ValueFields(const google::protobuf::RepeatedPtrField<v1::FieldSpec>& fields);

// Lays out (*values)[slot][field] (one entry per sample, one string per
// value field, already in its kind's encoding) as the field region, appended
// to *out: each field's values in sample order, fields one after another.
// Sets header->fields and header->field_bytes. *out is reserved first (the
// image buffer before the region is not copied again) and each value is
// freed once copied, so the region is never held twice beside the values.
// `item_shapes` (empty, or one per field) become FieldData.item_shape.
void AppendFieldRegion(const std::vector<v1::FieldSpec>& fields, std::vector<std::vector<std::string>>* values,
                       v1::BatchHeader* header, std::string* out,
                       const std::vector<std::vector<int64_t>>& item_shapes = {});

// OK when `header`'s fields are exactly `fields` (names and kinds, in
// order) for its sample count, each within field_bytes with offsets that
// start at 0, never decrease and end at the field's bytes (CLASS: 4 bytes per
// sample; CLASS/CLASSES: multiples of 4). DATA_LOSS naming what is wrong
// otherwise. A header without fields passes when `fields` is empty.
absl::Status CheckFieldLayout(const v1::BatchHeader& header, const std::vector<v1::FieldSpec>& fields);

// Bytes of one value item of the field's kind and item shape (CLASS and
// CLASSES: 4; text, bytes, json: 1; boxes: 16; keypoints: P x 12; masks:
// H x W; a video's audio track: K x C x L x 4); -1 when the shape does not
// fit the kind.
int64_t ItemBytes(const v1::FieldData& field);

// The most bytes one sample's values of these fields may take in a session
// (`config`'s max_field_bytes and max_tokens; `height` x `width` the
// output): what a client allows a header's field_bytes per sample, so that a
// hostile server cannot make it allocate more. Text, bytes and json:
// max_field_bytes; class 4; classes 4 x 4096; tokens 4 x max_tokens (or x
// max_field_bytes); boxes 1 MiB; keypoints 16 MiB; a mask H x W; masks
// 256 MiB.
int64_t MaxSampleFieldBytes(const std::vector<v1::FieldSpec>& fields, const v1::SessionConfig& config, int64_t height,
                            int64_t width);

// Sample `i`'s values of `field` within the region (a checked header).
absl::string_view FieldValue(const v1::FieldData& field, absl::string_view region, int64_t i);

}  // namespace stoker

#endif  // STOKER_COMMON_FIELD_LAYOUT_H_
