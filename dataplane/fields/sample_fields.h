// A sample's fields besides the image (SessionConfig.fields): read from the
// sample's source and checked against their kind before they join a batch.
// Values come out in the wire encoding of FieldData (stoker.proto): int32
// little-endian for CLASS/CLASSES, the member's bytes otherwise. Errors are
// decode failures (image_decoder.h): missing_field, bad_field or too_large,
// with a message naming the sample, the member and the problem.
// Stateless functions; thread-safe.
#ifndef STOKER_DATAPLANE_FIELDS_SAMPLE_FIELDS_H_
#define STOKER_DATAPLANE_FIELDS_SAMPLE_FIELDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dataplane/fields/target_fields.h"
#include "dataplane/fields/tokenizer.h"
#include "dataplane/sample/sample_source.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// Most class ids one CLASSES value may hold.
inline constexpr int kMaxClassesPerSample = 4096;

// Reads every field of `fields` (none of kind IMAGE) of sample `index` into
// (*values)[i], replacing what was there. A value over `max_bytes` is
// too_large.
// Fields whose `roles` entry (target_fields.h) is not kMember are targets
// and left to EncodeTargets.
// Fields of kind tokens are tokenised with `tokenizer` (at most `max_tokens`
// ids each, 0: all); it must be set when there are any.
absl::Status ReadSampleFields(const SampleSource& source, int64_t index, const std::vector<v1::FieldSpec>& fields,
                              const std::vector<TargetRole>& roles, int64_t max_bytes, std::vector<std::string>* values,
                              const Tokenizer* tokenizer = nullptr, int max_tokens = 0);

// The value at `json_path` of the JSON document `bytes`, typed by `kind`
// (see FieldSpec.json_path in stoker.proto); bad_field naming `where` and the
// path when the document does not parse, lacks the path or holds another type.
absl::StatusOr<std::string> ExtractJsonField(v1::FieldKind kind, const std::string& bytes, const std::string& json_path,
                                             const std::string& where);

// The bytes of one sample's encoded field values.
int64_t SampleFieldBytes(const std::vector<std::string>& values);

// OK when one sample's encoded values of `fields` (values[i] for fields[i],
// targets included) take at most `limit` bytes together: the bound a client
// holds a batch's field region to (MaxSampleFieldBytes in
// common/field_layout.h). Past it, too_large naming `where`, each field's
// bytes and the limit, so that the sample fails alone under the session's
// bad_sample_policy instead of its whole batch at the client.
absl::Status CheckSampleFieldBytes(const std::vector<v1::FieldSpec>& fields, const std::vector<std::string>& values,
                                   int64_t limit, const std::string& where);

// `bytes` (from member `where`) checked and encoded as `kind` wants.
absl::StatusOr<std::string> EncodeFieldValue(v1::FieldKind kind, std::string bytes, const std::string& where);

// Bytes per encoded value of a value field: 4 for class, classes, tokens
// (int32) and number (float32), 1 for text, bytes and json.
int64_t FieldElementBytes(v1::FieldKind kind);

// A value a user op (python(...), a plugin) made for a value field, checked
// as its kind is before it replaces the read one: a whole number of
// elements, one for class and number, at most kMaxClassesPerSample classes,
// UTF-8 text, JSON that parses, at most max_bytes (too_large). Failures are
// DecodeError(kTransform) naming `where` (e.g. "python(m:f) field 'caption'").
absl::StatusOr<std::string> CheckReplacedField(v1::FieldKind kind, std::string value, int64_t max_bytes,
                                               const std::string& where);

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates, at
// most U+10FFFF); *bad_at gets the offset of the first bad byte.
bool IsValidUtf8(absl::string_view text, size_t* bad_at);

// OK unless a field of `fields` cannot exist in `source`'s samples (an
// ImageFolder tree has only its image and class): INVALID_ARGUMENT naming
// the field and what the dataset has.
absl::Status CheckFieldsFitSource(const std::string& dataset, const SampleSource& source,
                                  const google::protobuf::RepeatedPtrField<v1::FieldSpec>& fields);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_FIELDS_SAMPLE_FIELDS_H_
