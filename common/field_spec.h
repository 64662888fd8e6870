// A session's sample fields (SessionConfig.fields in stoker.proto): their
// text form as users type it, e.g.
//   "image=jpg;png;webp, caption=txt, meta=json, label=cls"
// or a list of names, "image, label", and the rules a server checks.
// Each entry is NAME or NAME=SPEC, where SPEC is [KIND:]EXT[;EXT...]: the
// WebDataset member extensions that hold the field, tried in order; the kind,
// when not given, follows from the first extension (jpg/jpeg/png/webp/...:
// image, cls: class, txt/text: text, json: json, anything else: bytes) or,
// for a bare name, from the name (image/jpg/png: image, label/cls/class:
// class, labels/classes: classes, txt/text/caption: text, json/meta: json,
// video: image (a video sample's clips), audio: audio).
// Pure functions; thread-safe.
#ifndef STOKER_COMMON_FIELD_SPEC_H_
#define STOKER_COMMON_FIELD_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// Limits; part of the documented contract (load-bearing for clients).
inline constexpr int kMaxFields = 32;
inline constexpr int kMaxFieldNameLength = 64;
inline constexpr int kMaxFieldExtensions = 16;
inline constexpr int64_t kDefaultMaxFieldBytes = int64_t{1} << 20;

// INVALID_ARGUMENT naming the entry that does not parse. Empty text: no
// fields. The result passes CheckFields's syntax rules. "audio" (a bare
// name, or NAME=audio[:EXT]) is a video's audio track (kind AUDIO_TRACK); with
// `audio_sample` (the pipeline starts with audio(...)) and no image field,
// the first such field is the sample itself (kind IMAGE).
absl::StatusOr<std::vector<v1::FieldSpec>> ParseFieldsText(absl::string_view text, bool audio_sample = false);

// The inverse of ParseFieldsText, canonical: NAME=KIND:EXT;EXT (or NAME=KIND
// without extensions), joined by ", ".
std::string FieldsToText(const google::protobuf::RepeatedPtrField<v1::FieldSpec>& fields);

// OK, or INVALID_ARGUMENT naming fields[i] and what is allowed: the kinds,
// names (unique, 1..kMaxFieldNameLength of [A-Za-z0-9_.-]), extensions
// (1..32 of [a-z0-9_.-], at most kMaxFieldExtensions), exactly one IMAGE
// field, at most kMaxFields; and max_field_bytes within 0..`server_limit`.
absl::Status CheckFields(const v1::SessionConfig& config, int64_t server_limit);

// The lower-case name of a kind ("image", "class", ...), and its inverse
// (false for an unknown name).
const char* FieldKindName(v1::FieldKind kind);
bool FieldKindFromName(absl::string_view name, v1::FieldKind* kind);

// The image field's extensions when none are given.
const std::vector<std::string>& DefaultImageExtensions();

}  // namespace stoker

#endif  // STOKER_COMMON_FIELD_SPEC_H_
