#include "dataplane/sources/coco_source.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include "absl/strings/str_cat.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/fields/coco_masks.h"
#include "dataplane/sources/dataset.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

namespace stoker {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool IsNumber(const json& v) { return v.is_number() && std::isfinite(v.get<double>()); }

// A file name that stays inside the image directory.
bool SafeRelative(const std::string& name) {
  if (name.empty() || name[0] == '/' || name.find('\0') != std::string::npos) return false;
  for (const auto& part : fs::path(name)) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

// Builds a CocoSource from the parsed file; one per Open.
class CocoIndexer {
 public:
  CocoIndexer(CocoSource* source, std::string file) : s_(source), file_(std::move(file)) {}

  absl::Status Index(const json& root) {
    if (!root.is_object()) return Bad("is not a JSON object");
    if (absl::Status st = Categories(root); !st.ok()) return st;
    if (absl::Status st = Images(root); !st.ok()) return st;
    return Annotations(root);
  }

 private:
  absl::Status Bad(const std::string& what) const {
    return absl::DataLossError(absl::StrCat("annotation file ", file_, " ", what));
  }
  void LeaveOut(const std::string& why) { ++s_->left_out_[why]; }

  absl::Status Categories(const json& root) {
    if (!root.contains("categories") || !root["categories"].is_array()) return Bad("has no \"categories\" array");
    std::vector<std::pair<int64_t, std::string>> cats;
    for (const json& c : root["categories"]) {
      if (!c.is_object() || !c.contains("id") || !c["id"].is_number_integer())
        return Bad("has a category without an integer \"id\"");
      const std::string name = c.contains("name") && c["name"].is_string() ? c["name"].get<std::string>() : "";
      cats.emplace_back(c["id"].get<int64_t>(), name);
      if (c.contains("keypoints") && c["keypoints"].is_array()) {
        if (c["keypoints"].size() > static_cast<size_t>(kMaxKeypointsPerBox)) {
          return Bad(absl::StrCat("names ", c["keypoints"].size(), " keypoints for category ", c["id"].get<int64_t>(),
                                  "; at most ", kMaxKeypointsPerBox));
        }
        s_->keypoints_per_box_ = std::max<int>(s_->keypoints_per_box_, static_cast<int>(c["keypoints"].size()));
      }
    }
    if (cats.size() > static_cast<size_t>(kMaxCocoCategories)) {
      return Bad(absl::StrCat("has ", cats.size(), " categories; at most ", kMaxCocoCategories));
    }
    std::sort(cats.begin(), cats.end());
    for (const auto& [id, name] : cats) {
      if (!label_of_.emplace(id, static_cast<int32_t>(s_->class_names_.size())).second) {
        return Bad(absl::StrCat("has category id ", id, " twice"));
      }
      s_->class_names_.push_back(name.empty() ? std::to_string(id) : name);
    }
    return absl::OkStatus();
  }

  absl::Status Images(const json& root) {
    if (!root.contains("images") || !root["images"].is_array()) return Bad("has no \"images\" array");
    std::vector<std::pair<int64_t, CocoSource::Image>> images;
    for (const json& im : root["images"]) {
      if (!im.is_object() || !im.contains("id") || !im["id"].is_number_integer() || !im.contains("file_name") ||
          !im["file_name"].is_string() || !im.contains("width") || !im["width"].is_number_integer() ||
          !im.contains("height") || !im["height"].is_number_integer()) {
        return Bad("has an image without an integer \"id\", \"width\", \"height\" and a \"file_name\"");
      }
      CocoSource::Image image;
      image.file_name = im["file_name"].get<std::string>();
      const int64_t w = im["width"].get<int64_t>(), h = im["height"].get<int64_t>();
      if (!SafeRelative(image.file_name))
        return Bad(absl::StrCat("names image file \"", image.file_name, "\" outside its directory"));
      if (w < 1 || h < 1 || w > 65535 || h > 65535) {
        return Bad(absl::StrCat("gives image ", im["id"].get<int64_t>(), " a size of ", w, "x", h));
      }
      image.width = static_cast<int>(w);
      image.height = static_cast<int>(h);
      images.emplace_back(im["id"].get<int64_t>(), std::move(image));
    }
    if (images.empty()) return Bad("lists no images");
    std::sort(images.begin(), images.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [id, image] : images) {
      if (!index_of_.emplace(id, s_->images_.size()).second) return Bad(absl::StrCat("has image id ", id, " twice"));
      s_->images_.push_back(std::move(image));
    }
    return absl::OkStatus();
  }

  absl::Status Annotations(const json& root) {
    if (!root.contains("annotations")) return absl::OkStatus();  // image info only: no targets
    if (!root["annotations"].is_array()) return Bad("has \"annotations\" that is not an array");
    std::vector<std::vector<CocoSource::Annotation>> per_image(s_->images_.size());
    for (const json& a : root["annotations"]) {
      CocoSource::Annotation ann;
      size_t image = 0;
      if (!Parse(a, &ann, &image)) continue;
      per_image[image].push_back(std::move(ann));
    }
    for (size_t i = 0; i < per_image.size(); ++i) {
      s_->images_[i].first_annotation = static_cast<int64_t>(s_->annotations_.size());
      s_->images_[i].annotations = static_cast<int64_t>(per_image[i].size());
      for (auto& ann : per_image[i]) s_->annotations_.push_back(std::move(ann));
    }
    return absl::OkStatus();
  }

  // One annotation; false (and counted) when it is left out.
  bool Parse(const json& a, CocoSource::Annotation* ann, size_t* image) {
    if (!a.is_object() || !a.contains("image_id") || !a["image_id"].is_number_integer()) {
      LeaveOut("no integer image_id");
      return false;
    }
    auto im = index_of_.find(a["image_id"].get<int64_t>());
    if (im == index_of_.end()) {
      LeaveOut("an image_id that is not an image");
      return false;
    }
    *image = im->second;
    auto cat = a.contains("category_id") && a["category_id"].is_number_integer()
                   ? label_of_.find(a["category_id"].get<int64_t>())
                   : label_of_.end();
    if (cat == label_of_.end()) {
      LeaveOut("a category_id that is not a category");
      return false;
    }
    ann->label = cat->second;
    ann->id = a.contains("id") && a["id"].is_number_integer() ? a["id"].get<int64_t>() : -1;
    const json* bbox = a.contains("bbox") ? &a["bbox"] : nullptr;
    if (bbox == nullptr || !bbox->is_array() || bbox->size() != 4 ||
        !std::all_of(bbox->begin(), bbox->end(), [](const json& v) { return IsNumber(v); })) {
      LeaveOut("a bbox that is not 4 numbers");
      return false;
    }
    const double x = (*bbox)[0].get<double>(), y = (*bbox)[1].get<double>(), w = (*bbox)[2].get<double>(),
                 h = (*bbox)[3].get<double>();
    if (w < 0 || h < 0) {
      LeaveOut("a bbox of negative width or height");
      return false;
    }
    const CocoSource::Image& img = s_->images_[*image];
    // Clipped to the image, as torchvision's detection references do.
    ann->box[0] = static_cast<float>(std::clamp(x, 0.0, static_cast<double>(img.width)));
    ann->box[1] = static_cast<float>(std::clamp(y, 0.0, static_cast<double>(img.height)));
    ann->box[2] = static_cast<float>(std::clamp(x + w, 0.0, static_cast<double>(img.width)));
    ann->box[3] = static_cast<float>(std::clamp(y + h, 0.0, static_cast<double>(img.height)));
    ann->crowd = a.contains("iscrowd") && a["iscrowd"].is_number_integer() && a["iscrowd"].get<int64_t>() != 0;
    if (a.contains("segmentation")) Segmentation(a["segmentation"], img, ann);
    if (a.contains("keypoints")) Keypoints(a["keypoints"], ann);
    return true;
  }

  void MarkBad(CocoSource::Annotation* ann, const std::string& why) {
    ann->segmentation = CocoSource::Segmentation::kBad;
    bad_reasons_.push_back(why);  // ann->count says which: Open files it by annotation index
    ann->count = static_cast<int64_t>(bad_reasons_.size()) - 1;
    LeaveOut(absl::StrCat("segmentation: ", why.substr(0, why.find(':'))));
  }

  void Segmentation(const json& seg, const CocoSource::Image& img, CocoSource::Annotation* ann) {
    if (seg.is_array()) {  // polygons
      int64_t total = 0;
      for (const json& poly : seg) total += poly.is_array() ? static_cast<int64_t>(poly.size()) : 0;
      if (total > kMaxPolygonCoordinates) {
        return MarkBad(ann, absl::StrCat("polygons of ", total, " coordinates: at most ", kMaxPolygonCoordinates));
      }
      for (const json& poly : seg) {
        if (!poly.is_array()) continue;
        for (size_t v = 0; v < poly.size(); ++v) {
          const double extent = v % 2 == 0 ? img.width : img.height;
          if (IsNumber(poly[v]) && std::fabs(poly[v].get<double>() - extent / 2) > (0.5 + kMaxPolygonReach) * extent) {
            return MarkBad(ann, absl::StrCat("a polygon point ", poly[v].get<double>(), " far outside its image of ",
                                             img.width, "x", img.height));
          }
        }
      }
      ann->segmentation = CocoSource::Segmentation::kPolygons;
      ann->first = static_cast<int64_t>(s_->polygon_sizes_.size());
      ann->first_coordinate = static_cast<int64_t>(s_->polygon_coordinates_.size());
      for (const json& poly : seg) {
        if (!poly.is_array() || poly.size() < 6 || poly.size() % 2 != 0 ||
            !std::all_of(poly.begin(), poly.end(), [](const json& v) { return IsNumber(v); })) {
          continue;  // pycocotools cannot make a polygon of it either
        }
        for (const json& v : poly) s_->polygon_coordinates_.push_back(v.get<double>());
        s_->polygon_sizes_.push_back(static_cast<int64_t>(poly.size()));
        ++ann->count;
      }
      return;
    }
    if (!seg.is_object() || !seg.contains("counts") || !seg.contains("size") || !seg["size"].is_array() ||
        seg["size"].size() != 2 || !seg["size"][0].is_number_integer() || !seg["size"][1].is_number_integer()) {
      return MarkBad(ann, "a segmentation that is neither polygons nor an RLE {counts, size}");
    }
    ann->rle_height = static_cast<int>(std::clamp<int64_t>(seg["size"][0].get<int64_t>(), 0, 65535));
    ann->rle_width = static_cast<int>(std::clamp<int64_t>(seg["size"][1].get<int64_t>(), 0, 65535));
    if (ann->rle_height != img.height || ann->rle_width != img.width) {
      return MarkBad(ann, absl::StrCat("an RLE mask of ", ann->rle_width, "x", ann->rle_height, " for an image of ",
                                       img.width, "x", img.height));
    }
    const json& counts = seg["counts"];
    if (counts.is_string()) {
      ann->segmentation = CocoSource::Segmentation::kCompressedRle;
      ann->first = static_cast<int64_t>(s_->rle_chars_.size());
      s_->rle_chars_ += counts.get<std::string>();
      ann->count = static_cast<int64_t>(s_->rle_chars_.size()) - ann->first;
    } else if (counts.is_array() && std::all_of(counts.begin(), counts.end(), [](const json& v) {
                 return v.is_number_unsigned() && v.get<uint64_t>() <= 0xffffffffu;
               })) {
      ann->segmentation = CocoSource::Segmentation::kCountsRle;
      ann->first = static_cast<int64_t>(s_->rle_counts_.size());
      for (const json& v : counts) s_->rle_counts_.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
      ann->count = static_cast<int64_t>(counts.size());
    } else {
      MarkBad(ann, "RLE counts that are neither a string nor non-negative integers");
    }
  }

  void Keypoints(const json& kps, CocoSource::Annotation* ann) {
    const size_t want = 3 * static_cast<size_t>(s_->keypoints_per_box_);
    if (want == 0 || !kps.is_array() || kps.size() != want ||
        !std::all_of(kps.begin(), kps.end(), [](const json& v) { return IsNumber(v); })) {
      if (kps.is_array() && !kps.empty()) LeaveOut("keypoints: not 3 numbers per point of its category");
      return;
    }
    // Casting a double past float's range is undefined: such keypoints are left out, as malformed ones are.
    if (!std::all_of(kps.begin(), kps.end(),
                     [](const json& v) { return std::fabs(v.get<double>()) <= std::numeric_limits<float>::max(); })) {
      LeaveOut("keypoints: a coordinate outside a 32-bit float's range (|x| <= 3.4e38)");
      return;
    }
    ann->first_keypoint = static_cast<int64_t>(s_->keypoints_.size());
    for (const json& v : kps) s_->keypoints_.push_back(static_cast<float>(v.get<double>()));
  }

 public:
  std::vector<std::string> bad_reasons_;

 private:
  CocoSource* s_;
  const std::string file_;
  std::map<int64_t, int32_t> label_of_;  // category id -> label
  std::map<int64_t, size_t> index_of_;   // image id -> sample index
};

absl::StatusOr<std::shared_ptr<const CocoSource>> CocoSource::Open(const fs::path& image_dir,
                                                                   const fs::path& annotations, int64_t max_file_bytes,
                                                                   int64_t max_annotation_bytes,
                                                                   const std::atomic<bool>* cancelled,
                                                                   const fs::path& data_root) {
  std::error_code ec;
  const fs::path root = fs::canonical(data_root.empty() ? image_dir : data_root, ec);
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat("image directory ", (data_root.empty() ? image_dir : data_root).string(), ": ", ec.message()));
  }
  const int64_t bytes = static_cast<int64_t>(fs::file_size(annotations, ec));
  if (ec) return absl::NotFoundError(absl::StrCat("cannot read annotation file ", annotations.string()));
  if (max_annotation_bytes > 0 && bytes > max_annotation_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("annotation file ", annotations.string(), " holds ", bytes,
                                                     " bytes; --max-annotation-bytes is ", max_annotation_bytes));
  }
  absl::StatusOr<std::string> text = ReadFileBytes(annotations, max_annotation_bytes);
  if (!text.ok()) return text.status();
  const uint64_t file_hash = XXH3_64bits(text->data(), text->size());
  if (cancelled != nullptr && cancelled->load()) return absl::CancelledError("opening cancelled");
  std::shared_ptr<CocoSource> source(new CocoSource());
  source->dir_ = image_dir;
  source->root_ = root;
  source->max_file_bytes_ = max_file_bytes;
  CocoIndexer indexer(source.get(), annotations.string());
  try {
    const json root = json::parse(*text);
    std::string().swap(*text);
    if (absl::Status s = indexer.Index(root); !s.ok()) return s;
  } catch (const std::exception& e) {  // nlohmann's parse and type errors, bad_alloc
    return absl::DataLossError(absl::StrCat("annotation file ", annotations.string(), " is not valid: ", e.what()));
  }
  for (size_t i = 0; i < source->annotations_.size(); ++i) {
    Annotation& a = source->annotations_[i];
    if (a.segmentation == Segmentation::kBad) {
      source->bad_segmentations_[static_cast<int64_t>(i)] = indexer.bad_reasons_[static_cast<size_t>(a.count)];
    }
  }
  for (const auto& [why, n] : source->left_out_) {
    LOG(WARNING) << "annotation file " << annotations.string() << ": " << n << " annotations with " << why
                 << (why.rfind("segmentation", 0) == 0 ? " (their masks fail their samples as bad_field)"
                                                       : " left out");
  }
  FingerprintBuilder fingerprint;
  fingerprint.Add("coco").Add(static_cast<int64_t>(file_hash));
  for (const Image& im : source->images_)
    fingerprint.Add(im.file_name).Add(im.width).Add(im.height).Add(im.annotations);
  for (const std::string& name : source->class_names_) fingerprint.Add(name);
  source->fingerprint_ = fingerprint.Finish();
  return std::shared_ptr<const CocoSource>(std::move(source));
}

absl::StatusOr<std::string> CocoSource::Read(int64_t index) const {
  const std::string& name = images_[static_cast<size_t>(index)].file_name;
  const fs::path path = dir_ / name;
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);  // a missing file: ReadFileBytes names it
  if (!ec && !IsUnder(real, root_)) {
    return absl::PermissionDeniedError(
        absl::StrCat("image file \"", name, "\" resolves outside --data-root (through a symlink)"));
  }
  return ReadFileBytes(ec ? path : real, max_file_bytes_);
}

absl::Status CocoSource::ReadTargets(int64_t index, const TargetNeeds& needs, SampleTargets* t) const {
  const Image& im = images_[static_cast<size_t>(index)];
  t->points_per_box = needs.keypoints ? keypoints_per_box_ : 0;
  t->source_width = im.width;
  t->source_height = im.height;
  int64_t boundary_points = 0;  // walked for this sample's polygons so far: bounded
  if (needs.masks && int64_t{im.width} * im.height * im.annotations > kMaxMaskBytesPerSample) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat(Describe(index), ": ", im.annotations, " instance masks of ", im.width, "x",
                                    im.height, " would take more than ", kMaxMaskBytesPerSample, " bytes"));
  }
  for (int64_t k = 0; k < im.annotations; ++k) {
    const int64_t i = im.first_annotation + k;
    const Annotation& a = annotations_[static_cast<size_t>(i)];
    t->boxes.insert(t->boxes.end(), a.box, a.box + 4);
    t->labels.push_back(a.label);
    t->crowd.push_back(a.crowd);
    if (needs.keypoints && keypoints_per_box_ > 0) {
      const size_t n = 3 * static_cast<size_t>(keypoints_per_box_);
      if (a.first_keypoint >= 0) {
        t->keypoints.insert(t->keypoints.end(), keypoints_.begin() + a.first_keypoint,
                            keypoints_.begin() + a.first_keypoint + static_cast<std::ptrdiff_t>(n));
      } else {
        t->keypoints.insert(t->keypoints.end(), n, 0.0f);  // not labelled
      }
    }
    if (!needs.masks) continue;
    cv::Mat mask;
    switch (a.segmentation) {
      case Segmentation::kBad:
        return DecodeError(DecodeFailure::kBadField,
                           absl::StrCat(Describe(index), ": annotation ", a.id, " has ", bad_segmentations_.at(i)));
      case Segmentation::kNone: mask = cv::Mat::zeros(im.height, im.width, CV_8U); break;
      case Segmentation::kPolygons: {
        int64_t at = a.first_coordinate;
        for (int64_t p = a.first; p < a.first + a.count; ++p) {
          const int64_t n = polygon_sizes_[static_cast<size_t>(p)];
          std::vector<double> xy(polygon_coordinates_.begin() + at, polygon_coordinates_.begin() + at + n);
          boundary_points += PolygonBoundaryPoints(xy);
          if (boundary_points > kMaxBoundaryPointsPerSample) {
            return DecodeError(DecodeFailure::kTooLarge,
                               absl::StrCat(Describe(index), ": its polygons walk more than ",
                                            kMaxBoundaryPointsPerSample, " boundary points (annotation ", a.id, ")"));
          }
          absl::StatusOr<RunLengths> runs = PolygonRuns(xy, im.height, im.width);
          if (!runs.ok()) {
            return DecodeError(DecodeFailure::kBadField,
                               absl::StrCat(Describe(index), ": annotation ", a.id, ": ", runs.status().message()));
          }
          PaintRuns(*runs, &mask);
          at += n;
        }
        if (mask.empty()) mask = cv::Mat::zeros(im.height, im.width, CV_8U);
        break;
      }
      case Segmentation::kCompressedRle: {
        absl::StatusOr<RunLengths> runs = DecodeCompressedRuns(
            absl::string_view(rle_chars_).substr(static_cast<size_t>(a.first), static_cast<size_t>(a.count)),
            a.rle_height, a.rle_width);
        if (!runs.ok()) {
          return DecodeError(DecodeFailure::kBadField,
                             absl::StrCat(Describe(index), ": annotation ", a.id, ": ", runs.status().message()));
        }
        PaintRuns(*runs, &mask);
        break;
      }
      case Segmentation::kCountsRle: {
        RunLengths runs{a.rle_height, a.rle_width,
                        std::vector<uint32_t>(rle_counts_.begin() + a.first, rle_counts_.begin() + a.first + a.count)};
        if (absl::Status s = CheckRuns(runs); !s.ok()) {
          return DecodeError(DecodeFailure::kBadField,
                             absl::StrCat(Describe(index), ": annotation ", a.id, ": ", s.message()));
        }
        PaintRuns(runs, &mask);
        break;
      }
    }
    t->instance_masks.push_back(std::move(mask));
  }
  return absl::OkStatus();
}

}  // namespace stoker
