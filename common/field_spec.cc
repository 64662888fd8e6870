#include "common/field_spec.h"

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace stoker {
namespace {

struct KindName {
  v1::FieldKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {{v1::IMAGE, "image"},         {v1::CLASS, "class"},   {v1::CLASSES, "classes"},
                               {v1::TEXT, "text"},           {v1::BYTES, "bytes"},   {v1::JSON, "json"},
                               {v1::BOXES, "boxes"},         {v1::MASK, "mask"},     {v1::MASKS, "masks"},
                               {v1::KEYPOINTS, "keypoints"}, {v1::TOKENS, "tokens"}, {v1::NUMBER, "number"},
                               {v1::AUDIO_TRACK, "audio"}};
constexpr char kKindList[] =
    "image, class, classes, text, bytes, json, boxes, mask, masks, keypoints, tokens, number, audio";

bool IsImageExtension(absl::string_view ext) {
  static const auto* kImage = new std::set<std::string>{"jpg", "jpeg", "png", "webp", "bmp", "ppm", "tif", "tiff"};
  return kImage->count(std::string(ext)) > 0;
}

// The kind an extension implies.
v1::FieldKind KindOfExtension(absl::string_view ext) {
  if (IsImageExtension(ext)) return v1::IMAGE;
  if (ext == "cls") return v1::CLASS;
  if (ext == "txt" || ext == "text") return v1::TEXT;
  if (ext == "json") return v1::JSON;
  return v1::BYTES;
}

// The kind and extensions a bare name implies ("image", "label", ...).
v1::FieldSpec FromBareName(const std::string& name) {
  v1::FieldSpec spec;
  spec.set_name(name);
  if (name == "image" || name == "img" || IsImageExtension(name) || name == "video") {
    spec.set_kind(v1::IMAGE);  // the sample itself: its image, or its clips with a video pipeline
    if (IsImageExtension(name)) spec.add_extensions(name);
  } else if (name == "audio") {
    spec.set_kind(v1::AUDIO_TRACK);  // a video's audio track (with an audio pipeline: the sample; ParseFieldsText)
  } else if (name == "label" || name == "class" || name == "cls") {
    spec.set_kind(v1::CLASS);
  } else if (name == "labels" || name == "classes" || name == "iscrowd") {
    spec.set_kind(v1::CLASSES);  // on an annotated dataset: the boxes' labels (iscrowd: their crowd flags)
  } else if (name == "boxes" || name == "bbox" || name == "bboxes") {
    spec.set_kind(v1::BOXES);
  } else if (name == "mask" || name == "segmentation") {
    spec.set_kind(v1::MASK);
  } else if (name == "masks") {
    spec.set_kind(v1::MASKS);
  } else if (name == "keypoints") {
    spec.set_kind(v1::KEYPOINTS);
  } else if (name == "tokens" || name == "ids" || name == "input_ids") {
    spec.set_kind(v1::TOKENS);
    spec.add_extensions("txt");
  } else if (name == "caption" || name == "txt" || name == "text") {
    spec.set_kind(v1::TEXT);
    spec.add_extensions("txt");
  } else if (name == "json" || name == "meta") {
    spec.set_kind(v1::JSON);
    spec.add_extensions("json");
  } else {
    spec.set_kind(v1::BYTES);
    spec.add_extensions(name);
  }
  return spec;
}

bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-'; }
bool IsExtensionChar(char c) {
  return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '_' || c == '.' || c == '-';
}

absl::Status Bad(int i, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("fields[", i, "]: ", what));
}

}  // namespace

const char* FieldKindName(v1::FieldKind kind) {
  for (const KindName& k : kKinds) {
    if (k.kind == kind) return k.name;
  }
  return "unspecified";
}

bool FieldKindFromName(absl::string_view name, v1::FieldKind* kind) {
  for (const KindName& k : kKinds) {
    if (name == k.name) {
      *kind = k.kind;
      return true;
    }
  }
  return false;
}

const std::vector<std::string>& DefaultImageExtensions() {
  static const auto* kDefault = new std::vector<std::string>{"jpg", "jpeg", "png", "webp"};
  return *kDefault;
}

absl::StatusOr<std::vector<v1::FieldSpec>> ParseFieldsText(absl::string_view text, bool audio_sample) {
  std::vector<v1::FieldSpec> fields;
  if (absl::StripAsciiWhitespace(text).empty()) return fields;
  int i = 0;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    const size_t eq = entry.find('=');
    const std::string name(absl::StripAsciiWhitespace(entry.substr(0, eq)));
    if (name.empty())
      return Bad(i,
                 absl::StrCat("'", absl::CHexEscape(entry), "' has no name; write NAME or NAME=[KIND:]EXT[;EXT...]"));
    if (eq == absl::string_view::npos) {
      fields.push_back(FromBareName(name));
    } else {
      absl::string_view spec_text = absl::StripAsciiWhitespace(entry.substr(eq + 1));
      v1::FieldSpec spec;
      spec.set_name(name);
      const size_t colon = spec_text.find(':');
      v1::FieldKind kind = v1::FIELD_KIND_UNSPECIFIED;
      if (colon != absl::string_view::npos) {
        const std::string kind_name = absl::AsciiStrToLower(absl::StripAsciiWhitespace(spec_text.substr(0, colon)));
        if (!FieldKindFromName(kind_name, &kind)) {
          return Bad(i, absl::StrCat("unknown kind '", absl::CHexEscape(kind_name), "'; kinds: ", kKindList));
        }
        spec_text = spec_text.substr(colon + 1);
      }
      if (const size_t at = spec_text.find('@'); at != absl::string_view::npos) {  // EXT@json.key.path
        spec.set_json_path(std::string(absl::StripAsciiWhitespace(spec_text.substr(at + 1))));
        spec_text = spec_text.substr(0, at);
        if (kind == v1::FIELD_KIND_UNSPECIFIED) kind = v1::TEXT;  // "caption=json@text": a string
      }
      if (kind != v1::FIELD_KIND_UNSPECIFIED) {
      } else if (FieldKindFromName(absl::AsciiStrToLower(spec_text), &kind)) {
        spec_text = "";  // NAME=KIND: the kind's default members
      }
      for (absl::string_view ext : absl::StrSplit(spec_text, ';', absl::SkipWhitespace())) {
        spec.add_extensions(absl::AsciiStrToLower(absl::StripPrefix(absl::StripAsciiWhitespace(ext), ".")));
      }
      if (kind == v1::FIELD_KIND_UNSPECIFIED) {
        if (spec.extensions().empty()) return Bad(i, absl::StrCat("'", name, "=' names no member extension"));
        // "video=mp4", "audio=flac": the sample itself, read from that member
        // ("audio=bytes:flac" for the member's bytes); "audio=flac" on a
        // video_clip session is refused at open (the track has no member).
        kind = name == "video" ? v1::IMAGE : name == "audio" ? v1::AUDIO_TRACK : KindOfExtension(spec.extensions(0));
      }
      spec.set_kind(kind);
      if (spec.extensions().empty() &&
          (kind == v1::TEXT || kind == v1::JSON || kind == v1::BYTES || kind == v1::TOKENS)) {
        spec.add_extensions(kind == v1::TEXT || kind == v1::TOKENS ? "txt" : kind == v1::JSON ? "json" : name);
      }
      fields.push_back(std::move(spec));
    }
    ++i;
  }
  const bool has_image = std::any_of(fields.begin(), fields.end(), [](const auto& f) { return f.kind() == v1::IMAGE; });
  if (audio_sample && !has_image) {  // "audio": the sample of an audio(...) pipeline
    for (v1::FieldSpec& f : fields) {
      if (f.kind() == v1::AUDIO_TRACK && f.json_path().empty()) {
        f.set_kind(v1::IMAGE);
        break;
      }
    }
  }
  v1::SessionConfig check;
  for (const v1::FieldSpec& f : fields) *check.add_fields() = f;
  if (absl::Status s = CheckFields(check, 0); !s.ok()) return s;
  return fields;
}

std::string FieldsToText(const google::protobuf::RepeatedPtrField<v1::FieldSpec>& fields) {
  std::vector<std::string> parts;
  for (const v1::FieldSpec& f : fields) {
    std::string part = absl::StrCat(f.name(), "=", FieldKindName(f.kind()));
    if (!f.extensions().empty()) absl::StrAppend(&part, ":", absl::StrJoin(f.extensions(), ";"));
    if (!f.json_path().empty()) absl::StrAppend(&part, "@", f.json_path());
    parts.push_back(std::move(part));
  }
  return absl::StrJoin(parts, ", ");
}

absl::Status CheckFields(const v1::SessionConfig& config, int64_t server_limit) {
  const auto& fields = config.fields();
  if (fields.empty()) return absl::OkStatus();
  if (fields.size() > kMaxFields) {
    return absl::InvalidArgumentError(absl::StrCat(fields.size(), " fields; at most ", kMaxFields));
  }
  std::set<std::string> names;
  int images = 0;
  for (int i = 0; i < fields.size(); ++i) {
    const v1::FieldSpec& f = fields[i];
    const std::string& name = f.name();
    if (name.empty() || name.size() > kMaxFieldNameLength || !std::all_of(name.begin(), name.end(), IsNameChar)) {
      return Bad(i, absl::StrCat("name '", absl::CHexEscape(name.substr(0, 80)), "': 1..", kMaxFieldNameLength,
                                 " characters of letters, digits, '_', '.', '-'"));
    }
    if (!names.insert(name).second) return Bad(i, absl::StrCat("name '", name, "' appears twice"));
    if (f.kind() == v1::FIELD_KIND_UNSPECIFIED || !v1::FieldKind_IsValid(f.kind())) {
      return Bad(i, absl::StrCat("field '", name, "' has no kind; kinds: ", kKindList));
    }
    if (!f.json_path().empty()) {
      const std::string& p = f.json_path();
      const bool chars = std::all_of(p.begin(), p.end(), [](char c) { return IsNameChar(c) && c != '-'; });
      const bool kinds = f.kind() == v1::TEXT || f.kind() == v1::CLASS || f.kind() == v1::CLASSES ||
                         f.kind() == v1::NUMBER || f.kind() == v1::BYTES || f.kind() == v1::JSON;
      if (!chars || p.size() > 256 || p.front() == '.' || p.back() == '.' || p.find("..") != std::string::npos ||
          f.extensions().empty() || !kinds) {
        return Bad(i,
                   absl::StrCat("field '", name, "': json path '", absl::CHexEscape(p.substr(0, 80)),
                                "' must be keys and indices joined by dots (letters, digits, '_'), after a "
                                "member extension, for a field of kind text, class, classes, number, bytes or json"));
      }
    } else if (f.kind() == v1::NUMBER) {
      return Bad(i, absl::StrCat("field '", name, "' (number) needs a json path, e.g. '", name, "=number:json@score'"));
    }
    const bool from_annotations = f.kind() == v1::BOXES || f.kind() == v1::MASKS || f.kind() == v1::KEYPOINTS;
    if (from_annotations && !f.extensions().empty()) {
      return Bad(i, absl::StrCat("field '", name, "' (", FieldKindName(f.kind()),
                                 ") comes from the dataset's annotations, not from a member: give it no extension"));
    }
    if (f.kind() == v1::IMAGE) ++images;
    if (f.extensions_size() > kMaxFieldExtensions) {
      return Bad(i, absl::StrCat("field '", name, "' lists ", f.extensions_size(), " extensions; at most ",
                                 kMaxFieldExtensions));
    }
    for (const std::string& ext : f.extensions()) {
      if (ext.empty() || ext.size() > 32 || !std::all_of(ext.begin(), ext.end(), IsExtensionChar) ||
          !(absl::ascii_islower(ext[0]) || absl::ascii_isdigit(ext[0]))) {
        return Bad(i, absl::StrCat("field '", name, "': extension '", absl::CHexEscape(ext.substr(0, 40)),
                                   "'; 1..32 characters of lower-case letters, digits, '_', '.', '-', "
                                   "starting with a letter or digit"));
      }
    }
  }
  if (images != 1) {
    return absl::InvalidArgumentError(absl::StrCat("fields name ", images,
                                                   " image fields; exactly one field must be of kind image (the "
                                                   "sample itself: its image, or its video or audio)"));
  }
  const int64_t max = config.max_field_bytes();
  if (max < 0 || (server_limit > 0 && max > server_limit)) {
    return absl::InvalidArgumentError(absl::StrCat("max_field_bytes = ", max, "; allowed 0 (means ",
                                                   kDefaultMaxFieldBytes, ") up to ", server_limit,
                                                   " (stoker-server --max-field-bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace stoker
