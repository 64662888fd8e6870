#include "common/field_layout.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace stoker {

std::vector<v1::FieldSpec> ValueFields(const google::protobuf::RepeatedPtrField<v1::FieldSpec>& fields) {
  std::vector<v1::FieldSpec> out;
  for (const v1::FieldSpec& f : fields) {
    if (f.kind() != v1::IMAGE) out.push_back(f);
  }
  return out;
}

void AppendFieldRegion(const std::vector<v1::FieldSpec>& fields, std::vector<std::vector<std::string>>* values,
                       v1::BatchHeader* header, std::string* out,
                       const std::vector<std::vector<int64_t>>& item_shapes) {
  size_t total = 0;
  for (const auto& sample : *values) {
    for (const std::string& v : sample) total += v.size();
  }
  const size_t base = out->size();
  out->reserve(base + total);
  header->clear_fields();
  for (size_t f = 0; f < fields.size(); ++f) {
    v1::FieldData* data = header->add_fields();
    data->set_name(fields[f].name());
    data->set_kind(fields[f].kind());
    data->set_offset(static_cast<int64_t>(out->size() - base));
    if (f < item_shapes.size()) {
      for (int64_t d : item_shapes[f]) data->add_item_shape(d);
    }
    int64_t bytes = 0;
    data->add_sample_offsets(0);
    for (auto& sample : *values) {
      if (f < sample.size()) {
        out->append(sample[f]);
        bytes += static_cast<int64_t>(sample[f].size());
        std::string().swap(sample[f]);
      }
      data->add_sample_offsets(bytes);
    }
    data->set_bytes(bytes);
  }
  header->set_field_bytes(static_cast<int64_t>(out->size() - base));
}

absl::Status CheckFieldLayout(const v1::BatchHeader& h, const std::vector<v1::FieldSpec>& fields) {
  if (h.fields_size() != static_cast<int>(fields.size())) {
    return absl::DataLossError(absl::StrCat("batch ", h.batch_index(), " has ", h.fields_size(),
                                            " fields; the session asked for ", fields.size()));
  }
  if (h.field_bytes() < 0 || (fields.empty() && h.field_bytes() != 0)) {
    return absl::DataLossError(absl::StrCat("batch ", h.batch_index(), " claims ", h.field_bytes(), " field bytes"));
  }
  const int64_t n = h.sample_indices_size();
  for (size_t f = 0; f < fields.size(); ++f) {
    const v1::FieldData& d = h.fields(static_cast<int>(f));
    auto bad = [&](const std::string& what) {
      return absl::DataLossError(absl::StrCat("batch ", h.batch_index(), ", field '", fields[f].name(), "': ", what));
    };
    if (d.name() != fields[f].name() || d.kind() != fields[f].kind()) {
      return bad(absl::StrCat("sent as '", d.name(), "' of kind ", d.kind()));
    }
    if (d.offset() < 0 || d.bytes() < 0 || d.offset() > h.field_bytes() || d.bytes() > h.field_bytes() - d.offset()) {
      return bad(
          absl::StrCat("bytes [", d.offset(), ", +", d.bytes(), ") outside the ", h.field_bytes(), " field bytes"));
    }
    if (d.sample_offsets_size() != n + 1 || d.sample_offsets(0) != 0 ||
        d.sample_offsets(static_cast<int>(n)) != d.bytes()) {
      return bad(
          absl::StrCat(d.sample_offsets_size(), " sample offsets for ", n, " samples and ", d.bytes(), " bytes"));
    }
    const int64_t item = ItemBytes(d);
    if (item < 0) return bad(absl::StrCat("item shape [", absl::StrJoin(d.item_shape(), ","), "] for its kind"));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t a = d.sample_offsets(static_cast<int>(i)), b = d.sample_offsets(static_cast<int>(i + 1));
      const bool one_item =
          d.kind() == v1::CLASS || d.kind() == v1::MASK || d.kind() == v1::NUMBER || d.kind() == v1::AUDIO_TRACK;
      if (b < a || (b - a) % item != 0 || (one_item && b - a != item)) {
        return bad(absl::StrCat("sample ", i, " has values [", a, ", ", b, ")"));
      }
    }
  }
  return absl::OkStatus();
}

int64_t ItemBytes(const v1::FieldData& field) {
  const auto& shape = field.item_shape();
  auto product = [&](int64_t element) -> int64_t {
    int64_t p = element;
    for (int64_t d : shape) {
      if (d < 1 || d > 65536 || p > (int64_t{1} << 40) / d) return -1;
      p *= d;
    }
    return p;
  };
  switch (field.kind()) {
    case v1::CLASS:
    case v1::CLASSES:
    case v1::TOKENS:
    case v1::NUMBER: return shape.empty() ? 4 : -1;
    case v1::BOXES: return shape.size() == 1 && shape[0] == 4 ? 16 : -1;
    case v1::KEYPOINTS: return shape.size() == 2 && shape[1] == 3 ? product(4) : -1;
    case v1::MASK:
    case v1::MASKS: return shape.size() == 2 ? product(1) : -1;
    case v1::AUDIO_TRACK: {  // [C, L] or [K, C, L] float32: clips <= 64, channels <= 8, L samples
      if (shape.size() < 2 || shape.size() > 3) return -1;
      int64_t p = 4;
      const int dims = shape.size();
      for (int i = 0; i < dims; ++i) {
        const int64_t limit = i + 1 == dims ? int64_t{600} * 384000 : i + 2 == dims ? 8 : 64;
        if (shape[i] < 1 || shape[i] > limit) return -1;
        p *= shape[i];
      }
      return p;
    }
    default: return shape.empty() ? 1 : -1;
  }
}

int64_t MaxSampleFieldBytes(const std::vector<v1::FieldSpec>& fields, const v1::SessionConfig& config, int64_t height,
                            int64_t width) {
  const int64_t text = config.max_field_bytes() > 0 ? config.max_field_bytes() : int64_t{1} << 20;
  int64_t total = 0;
  for (const v1::FieldSpec& f : fields) {
    switch (f.kind()) {
      case v1::CLASS:
      case v1::NUMBER: total += 4; break;
      case v1::CLASSES: total += 4 * 4096; break;
      case v1::TOKENS: total += 4 * (config.max_tokens() > 0 ? config.max_tokens() : text); break;
      case v1::BOXES: total += int64_t{1} << 20; break;
      case v1::KEYPOINTS: total += int64_t{16} << 20; break;
      case v1::MASK: total += height * width; break;
      case v1::MASKS: total += int64_t{256} << 20; break;
      case v1::AUDIO_TRACK: {  // [K, C, L] float32 from the video_clip op (the server checks it)
        if (config.pipeline_size() == 0 || !config.pipeline(0).has_video_clip()) break;
        const v1::VideoClip& c = config.pipeline(0).video_clip();
        const double window = std::round(double{c.audio_seconds()} * (c.audio_rate() > 0 ? c.audio_rate() : 16000));
        total += static_cast<int64_t>(std::clamp(window, 0.0, 1e9)) * std::max(1, c.clips()) *
                 std::max(1, c.audio_channels()) * 4;
        break;
      }
      default: total += text; break;
    }
  }
  return total;
}

absl::string_view FieldValue(const v1::FieldData& field, absl::string_view region, int64_t i) {
  const int64_t a = field.sample_offsets(static_cast<int>(i)), b = field.sample_offsets(static_cast<int>(i + 1));
  return region.substr(static_cast<size_t>(field.offset() + a), static_cast<size_t>(b - a));
}

}  // namespace stoker
