// The session fields that are targets (boxes, their labels and crowd flags,
// instance masks, a per-pixel mask, keypoints): which field takes which
// part of a sample's SampleTargets (geometry.h), what the source must read,
// and their wire encoding once the pipeline has moved them (FieldData in
// stoker.proto: float32 and int32 little-endian, uint8 masks). Pure
// functions; thread-safe.
#ifndef STOKER_DATAPLANE_FIELDS_TARGET_FIELDS_H_
#define STOKER_DATAPLANE_FIELDS_TARGET_FIELDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dataplane/sample/geometry.h"
#include "dataplane/sample/sample_source.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

enum class TargetRole {
  kMember,  // not a target: a WebDataset member (or an ImageFolder class), sample_fields.h
  kBoxes,
  kLabels,  // a classes field without extensions on an annotated source
  kCrowd,   // ... named "iscrowd"
  kMasks,
  kMask,        // the per-pixel mask, from a WebDataset member (PNG, lossless)
  kSourceMask,  // the per-pixel mask of a segmentation source (images/ + masks/)
  kKeypoints,
  kAudioTrack,  // a video's audio track (AUDIO_TRACK): made by Pipeline::ProduceVideo, not a target
};

// One role per field of `fields` (the value fields, in order).
std::vector<TargetRole> TargetRoles(const std::vector<v1::FieldSpec>& fields, const SampleSource& source);
// What ReadTargets must provide for these roles.
TargetNeeds NeedsOf(const std::vector<TargetRole>& roles);

// Reads what the target roles need of sample `index`: the source's
// annotations (boxes, labels, crowd flags, instance masks, keypoints) and a
// mask member. Errors are decode failures naming the sample.
absl::Status ReadSampleTargets(const SampleSource& source, int64_t index, const std::vector<v1::FieldSpec>& fields,
                               const std::vector<TargetRole>& roles, const TargetNeeds& needs, SampleTargets* targets);

// Decodes a mask member (PNG: palette indices or 8-bit gray, never
// resampled through colour) into targets->mask. kBadField when it is not an
// 8-bit single-channel or palette image.
// Masks over `max_pixels` (0: no limit) are too_large, from the header.
absl::Status DecodeMaskMember(const std::string& bytes, const std::string& where, SampleTargets* targets,
                              int64_t max_pixels = 0);

// Writes the target fields' values (roles other than kMember) of one sample
// into (*values)[i]. `height` x `width` is the pipeline's output.
void EncodeTargets(const SampleTargets& targets, const std::vector<TargetRole>& roles, int height, int width,
                   std::vector<std::string>* values);

// Each field's item shape (FieldData.item_shape): boxes [4], keypoints
// [P, 3], masks and mask [height, width], a video's audio track
// `audio_track` (Pipeline::audio_track_shape); empty for the rest.
std::vector<std::vector<int64_t>> ItemShapes(const std::vector<v1::FieldSpec>& fields, int keypoints_per_box,
                                             int height, int width, const std::vector<int64_t>& audio_track = {});

}  // namespace stoker

#endif  // STOKER_DATAPLANE_FIELDS_TARGET_FIELDS_H_
