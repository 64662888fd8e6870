#include "dataplane/fields/target_fields.h"

#include <png.h>

#include <csetjmp>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"

namespace stoker {
namespace {

template <typename T>
void Append(const T* values, size_t n, std::string* out) {  // little-endian hosts (x86-64, aarch64)
  if (n > 0) out->append(reinterpret_cast<const char*>(values), n * sizeof(T));
}

void AppendMask(const cv::Mat& m, int height, int width, std::string* out) {
  if (m.rows != height || m.cols != width) {  // cannot happen after a fixed-size pipeline; zeros keep the layout
    out->append(static_cast<size_t>(height) * static_cast<size_t>(width), '\0');
    return;
  }
  for (int y = 0; y < height; ++y)
    out->append(reinterpret_cast<const char*>(m.ptr<uint8_t>(y)), static_cast<size_t>(width));
}

struct PngReader {
  const std::string* bytes;
  size_t at;
};

void ReadPngBytes(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (r->at + n > r->bytes->size()) png_error(png, "truncated");
  std::memcpy(out, r->bytes->data() + r->at, n);
  r->at += n;
}

void PngError(png_structp png, png_const_charp message) {
  auto* what = static_cast<char*>(png_get_error_ptr(png));
  std::snprintf(what, 200, "%s", message);
  longjmp(png_jmpbuf(png), 1);
}

void PngWarning(png_structp, png_const_charp) {}

// Decodes an 8-bit gray or palette PNG into its values (palette indices,
// not colours). Plain C state only between setjmp and longjmp.
bool DecodeIndexedPng(const std::string& bytes, cv::Mat* out, char* what, int64_t max_pixels, bool* too_large) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, what, PngError, PngWarning);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  PngReader reader{&bytes, 0};
  png_bytep* volatile rows = nullptr;  // assigned after setjmp: volatile, so a longjmp sees its value
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_free(png, rows);
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    return false;
  }
  png_set_read_fn(png, &reader, ReadPngBytes);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  const int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
  if (color != PNG_COLOR_TYPE_GRAY && color != PNG_COLOR_TYPE_PALETTE) {
    png_error(png, "not a gray or palette image (a mask holds one class per pixel)");
  }
  if (depth > 8) png_error(png, "16-bit samples (masks hold 8-bit classes)");
  if (max_pixels > 0 && static_cast<int64_t>(w) * h > max_pixels) {
    *too_large = true;
    png_error(png, "larger than --max-pixels");
  }
  if (depth < 8) png_set_packing(png);  // 1/2/4-bit values to one byte each, unscaled
  png_read_update_info(png, info);
  *out = cv::Mat(static_cast<int>(h), static_cast<int>(w), CV_8U);
  rows = static_cast<png_bytep*>(png_malloc(png, sizeof(png_bytep) * h));
  for (png_uint_32 y = 0; y < h; ++y) rows[y] = out->ptr<uint8_t>(static_cast<int>(y));
  png_read_image(png, const_cast<png_bytep*>(rows));
  png_free(png, rows);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

}  // namespace

std::vector<TargetRole> TargetRoles(const std::vector<v1::FieldSpec>& fields, const SampleSource& source) {
  std::vector<TargetRole> roles;
  for (const v1::FieldSpec& f : fields) {
    TargetRole role = TargetRole::kMember;
    switch (f.kind()) {
      case v1::BOXES: role = TargetRole::kBoxes; break;
      case v1::MASKS: role = TargetRole::kMasks; break;
      case v1::KEYPOINTS: role = TargetRole::kKeypoints; break;
      case v1::MASK: role = f.extensions().empty() ? TargetRole::kSourceMask : TargetRole::kMask; break;
      case v1::AUDIO_TRACK: role = TargetRole::kAudioTrack; break;
      case v1::CLASSES:
        if (f.extensions().empty() && source.has_annotations()) {
          role = f.name() == "iscrowd" ? TargetRole::kCrowd : TargetRole::kLabels;
        }
        break;
      default: break;
    }
    roles.push_back(role);
  }
  return roles;
}

TargetNeeds NeedsOf(const std::vector<TargetRole>& roles) {
  TargetNeeds needs;
  for (TargetRole r : roles) {
    if (r == TargetRole::kBoxes || r == TargetRole::kLabels || r == TargetRole::kCrowd) needs.boxes = true;
    if (r == TargetRole::kMasks) needs.masks = needs.boxes = true;
    if (r == TargetRole::kKeypoints) needs.keypoints = needs.boxes = true;
    if (r == TargetRole::kSourceMask) needs.mask = true;
  }
  return needs;
}

absl::Status DecodeMaskMember(const std::string& bytes, const std::string& where, SampleTargets* targets,
                              int64_t max_pixels) {
  char what[200] = "not a PNG";
  cv::Mat mask;
  if (bytes.size() < 8 || png_sig_cmp(reinterpret_cast<png_const_bytep>(bytes.data()), 0, 8) != 0) {
    return DecodeError(DecodeFailure::kBadField,
                       absl::StrCat(where, ": a mask must be a PNG (lossless; JPEG would blur the classes)"));
  }
  bool too_large = false;
  if (!DecodeIndexedPng(bytes, &mask, what, max_pixels, &too_large)) {
    return DecodeError(too_large ? DecodeFailure::kTooLarge : DecodeFailure::kBadField,
                       absl::StrCat(where, ": ", what));
  }
  targets->mask = std::move(mask);
  return absl::OkStatus();
}

absl::Status ReadSampleTargets(const SampleSource& source, int64_t index, const std::vector<v1::FieldSpec>& fields,
                               const std::vector<TargetRole>& roles, const TargetNeeds& needs, SampleTargets* targets) {
  if (needs.boxes || needs.masks || needs.keypoints || needs.mask) {
    if (absl::Status s = source.ReadTargets(index, needs, targets); !s.ok()) return s;
  }
  for (size_t f = 0; f < roles.size(); ++f) {
    if (roles[f] != TargetRole::kMask) continue;
    std::string which;
    absl::StatusOr<std::string> bytes =
        source.ReadField(index, {fields[f].extensions().begin(), fields[f].extensions().end()}, &which);
    if (!bytes.ok()) return bytes.status();
    const std::string where = absl::StrCat(source.Describe(index), ".", which, " (field '", fields[f].name(), "')");
    if (absl::Status s = DecodeMaskMember(*bytes, where, targets, needs.max_pixels); !s.ok()) return s;
  }
  return absl::OkStatus();
}

void EncodeTargets(const SampleTargets& t, const std::vector<TargetRole>& roles, int height, int width,
                   std::vector<std::string>* values) {
  for (size_t f = 0; f < roles.size(); ++f) {
    std::string& out = (*values)[f];
    switch (roles[f]) {
      case TargetRole::kMember:
      case TargetRole::kAudioTrack: continue;
      case TargetRole::kBoxes:
        out.clear();
        Append(t.boxes.data(), t.boxes.size(), &out);
        break;
      case TargetRole::kLabels:
        out.clear();
        Append(t.labels.data(), t.labels.size(), &out);
        break;
      case TargetRole::kCrowd:
        out.clear();
        Append(t.crowd.data(), t.crowd.size(), &out);
        break;
      case TargetRole::kKeypoints:
        out.clear();
        Append(t.keypoints.data(), t.keypoints.size(), &out);
        break;
      case TargetRole::kMask:
      case TargetRole::kSourceMask:
        out.clear();
        AppendMask(t.mask, height, width, &out);
        break;
      case TargetRole::kMasks:
        out.clear();
        for (const cv::Mat& m : t.instance_masks) AppendMask(m, height, width, &out);
        break;
    }
  }
}

std::vector<std::vector<int64_t>> ItemShapes(const std::vector<v1::FieldSpec>& fields, int keypoints_per_box,
                                             int height, int width, const std::vector<int64_t>& audio_track) {
  std::vector<std::vector<int64_t>> shapes;
  for (const v1::FieldSpec& f : fields) {
    switch (f.kind()) {
      case v1::BOXES: shapes.push_back({4}); break;
      case v1::KEYPOINTS: shapes.push_back({keypoints_per_box, 3}); break;
      case v1::MASK:
      case v1::MASKS: shapes.push_back({height, width}); break;
      case v1::AUDIO_TRACK: shapes.push_back(audio_track); break;
      default: shapes.emplace_back(); break;
    }
  }
  return shapes;
}

}  // namespace stoker
