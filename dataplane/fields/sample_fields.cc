#include "dataplane/fields/sample_fields.h"

#include <climits>
#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/field_spec.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/fields/json_path.h"
#include "nlohmann/json.hpp"

namespace stoker {
namespace {

void AppendInt32(int32_t v, std::string* out) {
  const uint32_t u = static_cast<uint32_t>(v);
  const char bytes[4] = {static_cast<char>(u & 0xff), static_cast<char>((u >> 8) & 0xff),
                         static_cast<char>((u >> 16) & 0xff), static_cast<char>((u >> 24) & 0xff)};
  out->append(bytes, 4);
}

absl::Status BadField(const std::string& where, absl::string_view what) {
  return DecodeError(DecodeFailure::kBadField, absl::StrCat(where, ": ", what));
}

// Decimal class ids separated by commas or white space.
absl::StatusOr<std::string> EncodeClasses(v1::FieldKind kind, const std::string& bytes, const std::string& where) {
  std::string out;
  int count = 0;
  for (absl::string_view token : absl::StrSplit(bytes, absl::ByAnyChar(", \t\r\n"), absl::SkipEmpty())) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(token, &id) || id < std::numeric_limits<int32_t>::min() ||
        id > std::numeric_limits<int32_t>::max()) {
      return BadField(where,
                      absl::StrCat("'", absl::CHexEscape(token.substr(0, 40)), "' is not a 32-bit integer class id"));
    }
    if (++count > kMaxClassesPerSample) {
      return BadField(where, absl::StrCat("more than ", kMaxClassesPerSample, " class ids"));
    }
    AppendInt32(static_cast<int32_t>(id), &out);
  }
  if (kind == v1::CLASS && count != 1) {
    return BadField(where, absl::StrCat(count,
                                        " class ids; a class field holds exactly one (use kind classes for "
                                        "several)"));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> ExtractJsonField(v1::FieldKind kind, const std::string& bytes, const std::string& json_path,
                                             const std::string& where) {
  absl::StatusOr<nlohmann::json> found = FindJsonPath(bytes, json_path, where);
  if (!found.ok()) return found.status();
  const nlohmann::json* v = &*found;
  auto wrong = [&](const char* want) {
    return BadField(where, absl::StrCat("JSON path '", json_path, "' holds ", v->type_name(), ", not ", want));
  };
  std::string out;
  auto int32 = [&](const nlohmann::json& x) {
    if (!x.is_number_integer()) return false;
    const int64_t i = x.is_number_unsigned() && x.get<uint64_t>() > INT32_MAX ? int64_t{1} << 40 : x.get<int64_t>();
    if (i < INT32_MIN || i > INT32_MAX) return false;
    AppendInt32(static_cast<int32_t>(i), &out);
    return true;
  };
  switch (kind) {
    case v1::TEXT:
      if (!v->is_string()) return wrong("a string");
      return v->get<std::string>();
    case v1::CLASS:
      if (!int32(*v)) return wrong("a 32-bit integer");
      return out;
    case v1::CLASSES:
      if (v->is_array()) {
        if (v->size() > static_cast<size_t>(kMaxClassesPerSample)) return wrong("at most 4096 integers");
        for (const nlohmann::json& x : *v) {
          if (!int32(x)) return wrong("32-bit integers");
        }
        return out;
      }
      if (!int32(*v)) return wrong("an integer or an array of them");
      return out;
    case v1::NUMBER: {
      if (!v->is_number()) return wrong("a number");
      const double d = v->get<double>();
      // Casting a double past float's range to float is undefined: such a value fails the sample.
      if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
        return BadField(where, absl::StrCat("JSON path '", json_path, "' holds ", d,
                                            ", outside the range of a number field (a 32-bit float, |x| <= 3.4e38)"));
      }
      const float f = static_cast<float>(d);
      out.append(reinterpret_cast<const char*>(&f), sizeof(f));  // little-endian hosts
      return out;
    }
    default: return v->dump();
  }
}

bool IsValidUtf8(absl::string_view text, size_t* bad_at) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    int len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07;
    } else {
      *bad_at = i;
      return false;
    }
    if (i + static_cast<size_t>(len) > n) {
      *bad_at = i;
      return false;
    }
    for (int k = 1; k < len; ++k) {
      if ((s[i + static_cast<size_t>(k)] & 0xc0) != 0x80) {
        *bad_at = i;
        return false;
      }
      cp = (cp << 6) | (s[i + static_cast<size_t>(k)] & 0x3f);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      *bad_at = i;
      return false;
    }
    i += static_cast<size_t>(len);
  }
  return true;
}

absl::StatusOr<std::string> EncodeFieldValue(v1::FieldKind kind, std::string bytes, const std::string& where) {
  switch (kind) {
    case v1::CLASS:
    case v1::CLASSES: return EncodeClasses(kind, bytes, where);
    case v1::TEXT: {
      size_t bad_at = 0;
      if (!IsValidUtf8(bytes, &bad_at)) return BadField(where, absl::StrCat("not UTF-8 (byte ", bad_at, ")"));
      return bytes;
    }
    case v1::JSON:
      // The SAX parser keeps its nesting on the heap: deep documents cannot
      // overflow the stack.
      if (!nlohmann::json::accept(bytes)) return BadField(where, "JSON that does not parse");
      return bytes;
    case v1::BYTES: return bytes;
    default: return BadField(where, absl::StrCat("kind ", kind, " is not a value field"));
  }
}

int64_t SampleFieldBytes(const std::vector<std::string>& values) {
  int64_t total = 0;
  for (const std::string& v : values) total += static_cast<int64_t>(v.size());
  return total;
}

absl::Status CheckSampleFieldBytes(const std::vector<v1::FieldSpec>& fields, const std::vector<std::string>& values,
                                   int64_t limit, const std::string& where) {
  const int64_t total = SampleFieldBytes(values);
  if (total <= limit) return absl::OkStatus();
  std::string each;
  for (size_t f = 0; f < fields.size() && f < values.size(); ++f) {
    absl::StrAppend(&each, each.empty() ? "" : ", ", fields[f].name(), " ", values[f].size());
  }
  return DecodeError(DecodeFailure::kTooLarge,
                     absl::StrCat(where, ": its fields hold ", total, " bytes (", each,
                                  "); a sample of this session may "
                                  "hold at most ",
                                  limit,
                                  " (boxes 1 MiB, keypoints 16 MiB, masks 256 MiB, classes 4096 "
                                  "ids, text, bytes and json max_field_bytes each)"));
}

int64_t FieldElementBytes(v1::FieldKind kind) {
  return kind == v1::CLASS || kind == v1::CLASSES || kind == v1::TOKENS || kind == v1::NUMBER ? 4 : 1;
}

absl::StatusOr<std::string> CheckReplacedField(v1::FieldKind kind, std::string value, int64_t max_bytes,
                                               const std::string& where) {
  const int64_t bytes = static_cast<int64_t>(value.size()), element = FieldElementBytes(kind);
  if (bytes > max_bytes) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat(where, " holds ", bytes, " bytes; the session's max_field_bytes is ", max_bytes));
  }
  if (bytes % element != 0) {
    return DecodeError(
        DecodeFailure::kTransform,
        absl::StrCat(where, " holds ", bytes, " bytes, not a whole number of ", element, "-byte values"));
  }
  const int64_t n = bytes / element;
  if ((kind == v1::CLASS || kind == v1::NUMBER) && n != 1) {
    return DecodeError(DecodeFailure::kTransform,
                       absl::StrCat(where, " holds ", n, " values; a ", v1::FieldKind_Name(kind), " field holds one"));
  }
  if (kind == v1::CLASSES && n > kMaxClassesPerSample) {
    return DecodeError(DecodeFailure::kTransform,
                       absl::StrCat(where, " holds ", n, " classes; at most ", kMaxClassesPerSample));
  }
  if (kind == v1::TEXT || kind == v1::JSON) {
    absl::StatusOr<std::string> checked = EncodeFieldValue(kind, std::move(value), where);
    if (!checked.ok()) return DecodeError(DecodeFailure::kTransform, checked.status().message());
    return checked;
  }
  return value;
}

absl::Status ReadSampleFields(const SampleSource& source, int64_t index, const std::vector<v1::FieldSpec>& fields,
                              const std::vector<TargetRole>& roles, int64_t max_bytes, std::vector<std::string>* values,
                              const Tokenizer* tokenizer, int max_tokens) {
  values->resize(fields.size());
  static const std::vector<std::string> kClassMember = {"cls"};
  for (size_t f = 0; f < fields.size(); ++f) {
    if (f < roles.size() && roles[f] != TargetRole::kMember) continue;  // a target: EncodeTargets
    const v1::FieldSpec& spec = fields[f];
    const bool classes = spec.kind() == v1::CLASS || spec.kind() == v1::CLASSES;
    std::string& out = (*values)[f];
    out.clear();
    if (classes && spec.extensions().empty() && !source.has_members()) {  // an ImageFolder's class
      AppendInt32(source.label(index), &out);
      continue;
    }
    const std::vector<std::string> extensions =
        spec.extensions().empty() ? kClassMember
                                  : std::vector<std::string>(spec.extensions().begin(), spec.extensions().end());
    std::string which;
    absl::StatusOr<std::string> bytes = source.ReadField(index, extensions, &which, max_bytes);
    if (!bytes.ok()) return bytes.status();
    const std::string where = absl::StrCat(source.Describe(index), ".", which, " (field '", spec.name(), "')");
    if (static_cast<int64_t>(bytes->size()) > max_bytes) {
      return DecodeError(
          DecodeFailure::kTooLarge,
          absl::StrCat(where, " holds ", bytes->size(), " bytes; the session's max_field_bytes is ", max_bytes));
    }
    if (!spec.json_path().empty()) {
      absl::StatusOr<std::string> value = ExtractJsonField(spec.kind(), *bytes, spec.json_path(), where);
      if (!value.ok()) return value.status();
      out = *std::move(value);
      continue;
    }
    if (spec.kind() == v1::TOKENS) {
      absl::StatusOr<std::string> text = EncodeFieldValue(v1::TEXT, *std::move(bytes), where);  // UTF-8 checked
      if (!text.ok()) return text.status();
      std::vector<int32_t> ids;
      if (tokenizer == nullptr) return DecodeError(DecodeFailure::kBadField, absl::StrCat(where, ": no tokenizer"));
      if (absl::Status s = tokenizer->Encode(*text, max_tokens, where, &ids); !s.ok()) return s;
      if (static_cast<int64_t>(ids.size()) > max_bytes) {  // NFKC can make more ids than bytes: the client's bound
        return DecodeError(DecodeFailure::kTooLarge,
                           absl::StrCat(where, ": ", ids.size(), " tokens; at most max_field_bytes (", max_bytes, ")"));
      }
      for (int32_t id : ids) AppendInt32(id, &out);
      continue;
    }
    absl::StatusOr<std::string> value = EncodeFieldValue(spec.kind(), *std::move(bytes), where);
    if (!value.ok()) return value.status();
    out = *std::move(value);
  }
  return absl::OkStatus();
}

absl::Status CheckFieldsFitSource(const std::string& dataset, const SampleSource& source,
                                  const google::protobuf::RepeatedPtrField<v1::FieldSpec>& fields) {
  for (const v1::FieldSpec& f : fields) {
    const bool annotation = f.kind() == v1::BOXES || f.kind() == v1::MASKS || f.kind() == v1::KEYPOINTS;
    if (annotation && !source.has_annotations()) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", f.name(), "' (", FieldKindName(f.kind()), ") comes from annotations, and dataset '",
                       dataset, "' has none: give the session annotations (a COCO instances file under --data-root)"));
    }
    if (f.kind() == v1::KEYPOINTS && source.keypoints_per_box() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("field '", f.name(), "' (keypoints): the annotations of '",
                                                     dataset, "' name no keypoints in their categories"));
    }
    if (f.kind() == v1::MASK && (f.extensions().empty() ? !source.has_masks() : !source.has_members())) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", f.name(),
                       "' (mask) comes from a segmentation dataset (images/ and masks/) without an extension, "
                       "or from a WebDataset member with one (e.g. '",
                       f.name(), "=mask:seg.png'); dataset '", dataset, "' is neither"));
    }
    if (source.has_annotations() && f.kind() != v1::IMAGE && !annotation &&
        !(f.kind() == v1::CLASSES && f.extensions().empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "field '", f.name(), "' (", FieldKindName(f.kind()), ") cannot be read from dataset '", dataset,
          "': an annotated dataset has the fields image, boxes, masks, keypoints and classes (labels, iscrowd)"));
    }
  }
  if (source.has_members() || source.has_annotations()) return absl::OkStatus();
  if (source.has_masks()) {
    for (const v1::FieldSpec& f : fields) {
      if (f.kind() != v1::IMAGE && f.kind() != v1::MASK) {
        return absl::InvalidArgumentError(absl::StrCat("field '", f.name(), "' (", FieldKindName(f.kind()),
                                                       ") cannot be read from segmentation dataset '", dataset,
                                                       "': it has the fields image and mask"));
      }
    }
    return absl::OkStatus();
  }
  for (const v1::FieldSpec& f : fields) {
    const bool class_of_tree = (f.kind() == v1::CLASS || f.kind() == v1::CLASSES) && f.extensions().empty();
    const bool track = f.kind() == v1::AUDIO_TRACK && source.media() == MediaKind::kVideo;  // the video's own
    if (f.kind() == v1::IMAGE || class_of_tree || track) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "field '", f.name(), "' (", FieldKindName(f.kind()), ") cannot be read from dataset '", dataset,
        "': its samples have only an image and a class (fields of kind image and class; a video also its audio "
        "track); other fields come from WebDataset shards"));
  }
  return absl::OkStatus();
}

}  // namespace stoker
