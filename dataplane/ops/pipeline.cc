#include "dataplane/ops/pipeline.h"

#include <algorithm>
#include <cstring>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dataplane/decode/file_kinds.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/decode/media_loader.h"
#include "dataplane/kernels/resample.h"
#include "dataplane/kernels/transforms.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_checks.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sample/sample_watch.h"
#include "dataplane/user_ops/python_stage.h"

namespace stoker {

namespace {

// The sample field (kind image) of an audio or video session: the source's
// own member, or members with extensions in `allowed` (with the dot).
absl::Status CheckMediaMembers(const v1::FieldSpec& f, const std::set<std::string>& allowed, const char* first_op) {
  if (f.kind() != v1::IMAGE) return absl::OkStatus();
  for (const std::string& ext : f.extensions()) {
    if (allowed.count("." + ext) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", f.name(), "' is the sample, read from member '.", ext, "'; the sample of a ",
                       first_op, " pipeline is a member with one of: ", absl::StrJoin(allowed, " ")));
    }
  }
  return absl::OkStatus();
}

bool IsTargetKind(v1::FieldKind kind) {
  return kind == v1::BOXES || kind == v1::MASK || kind == v1::MASKS || kind == v1::KEYPOINTS;
}

// What every session's config must hold, whatever its ops: a pipeline of at
// most kMaxPipelineOps ops, a batch size in range, a known dtype and layout.
absl::Status CheckSessionBasics(const v1::SessionConfig& config) {
  if (config.pipeline_size() > kMaxPipelineOps) {
    return absl::InvalidArgumentError(
        absl::StrCat("the pipeline has ", config.pipeline_size(), " ops; at most ", kMaxPipelineOps, " are allowed"));
  }
  if (config.batch_size() < 1 || config.batch_size() > kMaxBatchSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size = ", config.batch_size(), "; allowed range is 1..", kMaxBatchSize));
  }
  if (!v1::DType_IsValid(config.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("dtype = ", config.dtype(), "; supported: UINT8, FLOAT16, FLOAT32"));
  }
  if (!v1::Layout_IsValid(config.layout())) {
    return absl::InvalidArgumentError(absl::StrCat("layout = ", config.layout(), "; supported: NHWC, NCHW"));
  }
  if (config.pipeline().empty()) {
    return absl::InvalidArgumentError(
        "pipeline is empty; it must end in a fixed size (add center_crop or random_resized_crop)");
  }
  return absl::OkStatus();
}

// An audio(...) pipeline's fields: its sample is its audio, so no image
// targets and no video's audio track.
absl::Status CheckAudioFields(const v1::SessionConfig& config) {
  for (const v1::FieldSpec& f : config.fields()) {
    if (IsTargetKind(f.kind())) {
      return absl::InvalidArgumentError(absl::StrCat("field '", f.name(), "' of kind ", v1::FieldKind_Name(f.kind()),
                                                     " is an image's: an audio pipeline's sample is its audio"));
    }
    if (absl::Status s = CheckMediaMembers(f, AudioExtensions(), "audio(...)"); !s.ok()) return s;
    if (f.kind() == v1::AUDIO_TRACK) {
      return absl::InvalidArgumentError(absl::StrCat("field '", f.name(),
                                                     "' of kind audio is a video's audio track; "
                                                     "an audio(...) pipeline's sample is the field of kind image"));
    }
  }
  return absl::OkStatus();
}

// The ops (`entries`, one per op) against the session's target fields, by
// their entries' rules: an op may need boxes; user ops and the ops that
// refuse targets cannot move them.
absl::Status CheckOpsMoveTargets(const v1::SessionConfig& config, const std::vector<const OpEntry*>& entries) {
  const bool has_boxes = std::any_of(config.fields().begin(), config.fields().end(),
                                     [](const v1::FieldSpec& f) { return f.kind() == v1::BOXES; });
  const bool has_targets = std::any_of(config.fields().begin(), config.fields().end(),
                                       [](const v1::FieldSpec& f) { return IsTargetKind(f.kind()); });
  for (size_t i = 0; i < entries.size(); ++i) {
    const OpEntry* entry = entries[i];
    const v1::Op& op = config.pipeline(static_cast<int>(i));
    if (entry == nullptr) continue;
    if (entry->rules.boxes_why != nullptr && !has_boxes) {
      return absl::InvalidArgumentError(absl::StrCat("pipeline[", i, "].", OpName(*entry, op), " ",
                                                     entry->rules.boxes_why,
                                                     ": the session needs a field of kind boxes"));
    }
    if (has_targets && entry->user != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("pipeline[", i, "] ", PipelineToText({op}),
                       " cannot move boxes, masks or keypoints yet: a session with target fields cannot use user ops"));
    }
    if (has_targets && entry->targets == OpTargets::kRefused) {
      const char* why = entry->rules.refused_why;
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline[", i, "].", OpName(*entry, op), " cannot move boxes, masks or keypoints",
          why != nullptr ? absl::StrCat(" (", why, ")") : "", ": a session with target fields cannot use it"));
    }
  }
  return absl::OkStatus();
}

// The entry's rule "only last" for the op at `i` of `count`: "SUBJECT must
// be the last op SUFFIX" (`subject` names the op, `suffix` the sequence).
// "Only first" is CheckPipelineOp's, before the op's own checks.
absl::Status CheckLast(const std::string& subject, absl::string_view suffix, const OpRules& rules, size_t i,
                       size_t count) {
  if (rules.place != OpRules::kLast || i + 1 == count) return absl::OkStatus();
  return Misplaced(subject, suffix, rules);
}

absl::Status BatchTooLarge(const v1::SessionConfig& config, int64_t sample_bytes) {
  return absl::InvalidArgumentError(absl::StrCat("batch_size x sample bytes = ", config.batch_size(), " x ",
                                                 sample_bytes, " bytes; a batch may hold at most ", kMaxBatchBytes,
                                                 " bytes"));
}

}  // namespace

absl::StatusOr<Pipeline> Pipeline::Create(const v1::SessionConfig& config, UserOps user) {
  if (absl::Status s = CheckSessionBasics(config); !s.ok()) return s;
  Pipeline p;
  p.user_ = std::move(user);
  if (IsAudioPipeline(config.pipeline())) {  // audio_ops.h: the session's dtype and layout describe images
    if (absl::Status s = p.CreateAudio(config); !s.ok()) return s;
    return p;
  }
  if (config.layout() == v1::AUDIO) {
    return absl::InvalidArgumentError("layout = AUDIO is an audio pipeline's; images are NHWC or NCHW");
  }
  p.layout_ = config.layout() == v1::NCHW ? v1::NCHW : v1::NHWC;
  if (config.dtype() == v1::INT16) {
    return absl::InvalidArgumentError("dtype = INT16 is audio(format=int16)'s; images are UINT8, FLOAT16 or FLOAT32");
  }
  p.dtype_ = config.dtype() == v1::DTYPE_UNSPECIFIED ? v1::UINT8 : config.dtype();
  bool fixed = false;
  if (absl::Status s = p.CheckImageOps(config, fixed); !s.ok()) return s;
  if (fixed && config.batch_size() * p.sample_bytes() > kMaxBatchBytes) return BatchTooLarge(config, p.sample_bytes());
  if (!fixed) {
    return absl::InvalidArgumentError(
        "pipeline output size is not fixed, so samples cannot be batched: add center_crop(size), "
        "random_resized_crop(size) or resize_pad(size) after the last resize or random_iou_crop");
  }
  if (!p.ops_.empty() && p.ops_[0].has_video_clip()) {
    if (absl::Status s = p.CheckVideoSession(config); !s.ok()) return s;
  }
  if (!p.video_) {
    for (const v1::FieldSpec& f : config.fields()) {
      if (f.kind() == v1::AUDIO_TRACK) {
        return absl::InvalidArgumentError(absl::StrCat("field '", f.name(),
                                                       "' of kind audio is a video's audio "
                                                       "track: the pipeline must start with video_clip(...)"));
      }
    }
  }
  if (absl::Status s = CheckOpsMoveTargets(config, p.entries_); !s.ok()) return s;
  return p;
}

absl::Status Pipeline::CreateAudio(const v1::SessionConfig& config) {
  if (absl::Status s = CheckAudioFields(config); !s.ok()) return s;
  std::vector<v1::Op> ops(config.pipeline().begin(), config.pipeline().end());
  absl::StatusOr<AudioPipeline> audio = AudioPipeline::Create(&ops, config.batch_size());
  if (!audio.ok()) return audio.status();
  for (v1::Op& op : ops) {
    const OpEntry* entry = FindOp(op);  // op_registry.h: checked by AudioPipeline::Create
    AddOp(std::move(op), entry);
  }
  if (config.cache_mode() == v1::CACHE_DECODED) {
    return absl::InvalidArgumentError(
        "cache_mode CACHE_DECODED keeps decoded images; an audio session can use "
        "CACHE_RAW or CACHE_BATCH");
  }
  audio_ = std::make_shared<const AudioPipeline>(*std::move(audio));
  layout_ = v1::AUDIO;
  dtype_ = audio_->int16() ? v1::INT16 : v1::FLOAT32;
  return absl::OkStatus();
}

absl::Status Pipeline::CheckImageOps(const v1::SessionConfig& config, bool& fixed) {
  for (int i = 0; i < config.pipeline_size(); ++i) {
    v1::Op op = config.pipeline(i);
    const std::string where = absl::StrCat("pipeline[", i, "]");
    const OpEntry* entry = nullptr;
    if (auto s = CheckOpAt(where, static_cast<size_t>(i), op, fixed, &entry); !s.ok()) return s;
    const std::string subject = absl::StrCat(where, ".", OpName(*entry, op));
    if (auto s = CheckLast(subject, "", entry->rules, i, config.pipeline_size()); !s.ok()) return s;
    if (entry->rules.float_why != nullptr && dtype_ == v1::UINT8) {
      return absl::InvalidArgumentError(
          absl::StrCat(subject, " needs dtype FLOAT16 or FLOAT32 (", entry->rules.float_why, ")"));
    }
    if (op.has_normalize()) TakeNormalize(op.normalize());
    AddOp(std::move(op), entry);
  }
  return absl::OkStatus();
}

absl::Status Pipeline::CheckVideoSession(const v1::SessionConfig& config) {
  video_ = true;
  std::string why;
  if (LoadMediaModule(&why) == nullptr) return absl::FailedPreconditionError(why);
  if (config.cache_mode() == v1::CACHE_DECODED) {
    return absl::InvalidArgumentError(
        "cache_mode CACHE_DECODED keeps decoded images; a video_clip session can "
        "use CACHE_RAW or CACHE_BATCH");
  }
  for (const v1::FieldSpec& f : config.fields()) {
    if (IsTargetKind(f.kind())) {
      return absl::InvalidArgumentError(absl::StrCat("field '", f.name(), "' of kind ", v1::FieldKind_Name(f.kind()),
                                                     ": a video_clip pipeline's sample is its clips"));
    }
    if (absl::Status s = CheckMediaMembers(f, VideoExtensions(), "video_clip(...)"); !s.ok()) return s;
  }
  if (has_user_ops()) {
    return absl::InvalidArgumentError("python(...) and plugin ops do not run on video clips yet");
  }
  if (absl::Status s = CheckAudioTrack(config); !s.ok()) return s;
  if (config.batch_size() * sample_bytes() > kMaxBatchBytes) return BatchTooLarge(config, sample_bytes());
  return absl::OkStatus();
}

absl::StatusOr<Pipeline> Pipeline::CreatePrefix(const std::vector<v1::Op>& ops, UserOps user) {
  if (ops.size() > static_cast<size_t>(kMaxPipelineOps)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the stored prefix has ", ops.size(), " ops; at most ", kMaxPipelineOps, " are allowed"));
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpEntry* entry = FindOp(ops[i]);
    if (entry != nullptr && entry->rules.prefix_why != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("prefix[", i, "] ", PipelineToText({ops[i]}), ": ", entry->rules.prefix_why));
    }
  }
  Pipeline p;
  p.user_ = std::move(user);
  bool fixed = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    v1::Op op = ops[i];
    const std::string where = absl::StrCat("prefix[", i, "]");
    const OpEntry* entry = nullptr;
    if (auto s = p.CheckOpAt(where, i, op, fixed, &entry); !s.ok()) return s;
    if (entry != nullptr && (entry->user != nullptr ? entry->user->random(op, p.user_) : entry->random(op))) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " ", PipelineToText({op}), " is random: random ops stay online (after the prefix)"));
    }
    const std::string subject = absl::StrCat(where, " ", OpName(*entry, op));
    if (auto s = CheckLast(subject, " of the prefix", entry->rules, i, ops.size()); !s.ok()) return s;
    if (entry->rules.float_why != nullptr) p.dtype_ = v1::FLOAT32;  // stored as float32 pixels
    if (op.has_normalize()) p.TakeNormalize(op.normalize());
    p.AddOp(std::move(op), entry);
  }
  return p;
}

void Pipeline::TakeNormalize(const v1::Normalize& normalize) {
  normalize_ = true;
  for (int c = 0; c < 3; ++c) {
    mean_[c] = normalize.mean(c);
    std_[c] = normalize.std(c);
  }
}

cv::Mat Pipeline::Normalized(const cv::Mat& rgb) const {
  cv::Mat f;
  rgb.convertTo(f, CV_32FC3, 1.0 / 255);
  if (normalize_) {
    cv::subtract(f, cv::Scalar(mean_[0], mean_[1], mean_[2]), f);
    cv::divide(f, cv::Scalar(std_[0], std_[1], std_[2]), f);
  }
  return f;
}

int64_t Pipeline::frame_bytes() const {
  const int64_t element = dtype_ == v1::FLOAT32 ? 4 : dtype_ == v1::FLOAT16 ? 2 : 1;
  return int64_t{out_height_} * out_width_ * 3 * element;
}

int64_t Pipeline::sample_bytes() const {
  if (audio_) return audio_->sample_bytes();
  if (video_) return frame_bytes() * ops_[0].video_clip().frames() * ops_[0].video_clip().clips();
  return frame_bytes();
}

std::vector<int64_t> Pipeline::SampleShape() const {
  if (audio_) return audio_->SampleShape();
  std::vector<int64_t> shape;
  if (video_) {
    if (ops_[0].video_clip().clips() > 1) shape.push_back(ops_[0].video_clip().clips());
    shape.push_back(ops_[0].video_clip().frames());
  }
  if (layout_ == v1::NCHW) {
    shape.insert(shape.end(), {3, out_height_, out_width_});
  } else {
    shape.insert(shape.end(), {out_height_, out_width_, 3});
  }
  return shape;
}

absl::Status Pipeline::Produce(absl::string_view encoded, Rng& rng, int64_t max_pixels, uint8_t* dst,
                               SampleTimes* times, size_t first_op, GeometrySink* geometry, UserOpIo* io) const {
  if (audio_) return audio_->Produce(encoded, rng, 0, dst, times);
  if (video_) {
    VideoLimits limits;
    limits.max_pixels = max_pixels;
    return ProduceVideo(encoded, rng, limits, dst, times);
  }
  absl::StatusOr<cv::Mat> image = DecodeAndApply(encoded, rng, max_pixels, first_op, times, geometry, io);
  if (!image.ok()) return image.status();
  const absl::Time t0 = absl::Now();
  absl::Status stored = Store(*image, dst);
  times->augment += absl::Now() - t0;
  return stored;
}

absl::StatusOr<cv::Mat> Pipeline::DecodeAndApply(absl::string_view encoded, Rng& rng, int64_t max_pixels,
                                                 size_t first_op, SampleTimes* times, GeometrySink* geometry,
                                                 UserOpIo* io) const {
  if (audio_) return absl::FailedPreconditionError("an audio pipeline makes no image");
  if (video_) return absl::FailedPreconditionError("a video_clip pipeline makes clips, not one image");
  const absl::Time t0 = absl::Now();
  absl::StatusOr<ImageInfo> info = ProbeImage(encoded);
  if (!info.ok()) return info.status();
  if (geometry != nullptr) {
    if (absl::Status s = geometry->Start(info->width, info->height); !s.ok()) return s;
  }
  // The first op fused with decoding, when its entry says how (OpEntry::fused):
  // only its region decoded, shrunk in the DCT domain where it allows.
  CropBox region;
  int scale = 8;  // eighths: full size
  const OpEntry* first = first_op < ops_.size() ? entries_[first_op] : nullptr;
  const bool fused = first != nullptr && first->fused.plan != nullptr &&
                     first->fused.plan(ops_[first_op], info->height, info->width, rng, &region, &scale);
  absl::StatusOr<cv::Mat> decoded = DecodeImage(encoded, region, scale, max_pixels);
  if (!decoded.ok()) return decoded.status();
  const absl::Time t1 = absl::Now();
  cv::Mat image = *std::move(decoded);
  if (geometry != nullptr && region.width > 0) geometry->Step(GeometryStep::Crop(region));
  if (fused && first->fused.finish != nullptr) {
    const cv::Size original(info->width, info->height);
    if (absl::Status s = first->fused.finish(ops_[first_op], original, max_pixels, image, geometry); !s.ok()) return s;
  }
  const size_t next_op = fused ? first_op + 1 : first_op;
  UserOpIo own;
  if (io == nullptr) io = &own;
  const absl::Duration python_before = io->python_time;
  absl::StatusOr<cv::Mat> applied = Apply(std::move(image), rng, next_op, max_pixels, geometry, io);
  times->python = io->python_time - python_before;
  times->decode = t1 - t0;
  times->augment = absl::Now() - t1 - times->python;
  return applied;
}

void Pipeline::AddOp(v1::Op op, const OpEntry* entry) {
  has_user_ops_ = has_user_ops_ || (entry != nullptr && entry->user != nullptr);
  entries_.push_back(entry);
  ops_.push_back(std::move(op));
}

absl::StatusOr<cv::Mat> Pipeline::Apply(cv::Mat image, Rng& rng, size_t first_op, int64_t max_pixels,
                                        GeometrySink* geometry, UserOpIo* io) const {
  if (audio_) return absl::FailedPreconditionError("an audio pipeline makes no image");
  if (geometry != nullptr && geometry->width == 0) geometry->width = image.cols, geometry->height = image.rows;
  OpContext context;
  if (normalize_) {
    std::copy(mean_, mean_ + 3, context.mean);
    std::copy(std_, std_ + 3, context.std);
  }
  for (size_t i = first_op; i < ops_.size(); ++i) {
    if (absl::Status s = SampleWatch::Check(); !s.ok()) return s;  // a cancelled stream, a sample past its CPU time
    const v1::Op& op = ops_[i];
    const OpEntry* entry = entries_[i];
    if (entry == nullptr) continue;  // none set
    if (entry->user != nullptr) {    // run with what the pipeline holds for it
      if (absl::Status s = ApplyUserOp(i, *entry->user, image, rng, max_pixels, io); !s.ok()) return s;
    } else if (entry->apply != nullptr) {
      if (entry->limit != nullptr) {
        if (absl::Status s = entry->limit(op, image.size(), max_pixels); !s.ok()) return s;
      }
      entry->apply(op, image, rng, context, geometry);
    }
  }
  if (absl::Status s = SampleWatch::Check(); !s.ok()) return s;  // a kernel that stopped early left no result
  return image;
}

void Pipeline::NoteSize(size_t i, const OpEntry* entry, bool fixed_before, cv::Size before, bool fixed_after,
                        cv::Size after) {
  // An op that sets the size (or changes it) frees the user ops before it.
  const auto plugin = plugin_ops_.find(i);
  const bool user_fixed = entry != nullptr && entry->user != nullptr && entry->user->fixes_size != nullptr &&
                          entry->user->fixes_size(plugin != plugin_ops_.end() ? plugin->second.get() : nullptr);
  // entry->sets_size: the op makes its size whatever its input's.
  const bool sets_size =
      (entry != nullptr && entry->sets_size) || user_fixed || !fixed_after || after != before || !fixed_before;
  if (sets_size) keeps_size_.clear();
  // A user op must make the size the checks assumed: its declared size (a
  // plugin's fixed output), or the size it was given when that was fixed.
  if (entry != nullptr && entry->user != nullptr && fixed_after && (fixed_before || user_fixed)) {
    keeps_size_[i] = after;
  }
}

absl::Status Pipeline::CheckOpAt(const std::string& where, size_t i, v1::Op& op, bool& fixed, const OpEntry** entry) {
  const bool fixed_before = fixed;
  const cv::Size before(out_width_, out_height_);
  std::shared_ptr<const PluginInstance> plugin;
  if (absl::Status s = CheckPipelineOp(where, i, op, fixed, out_height_, out_width_, user_, &plugin, entry); !s.ok()) {
    return s;
  }
  if (plugin != nullptr) plugin_ops_[i] = std::move(plugin);
  NoteSize(i, *entry, fixed_before, before, fixed, cv::Size(out_width_, out_height_));
  return absl::OkStatus();
}

absl::Status Pipeline::ApplyUserOp(size_t i, const UserOpHooks& hooks, cv::Mat& image, Rng& rng, int64_t max_pixels,
                                   UserOpIo* io) const {
  const v1::Op& op = ops_[i];
  const int64_t limit = max_pixels > 0 ? max_pixels : int64_t{1} << 28;
  const auto plugin = plugin_ops_.find(i);  // the instance its check made (plugin ops)
  absl::StatusOr<std::optional<cv::Mat>> ran =
      hooks.run(op, user_, plugin != plugin_ops_.end() ? plugin->second.get() : nullptr, i, image, rng, limit, io);
  if (!ran.ok()) return ran.status();
  if (!ran->has_value()) return absl::OkStatus();  // the gate skipped it
  cv::Mat* out = &**ran;
  if (auto keep = keeps_size_.find(i); keep != keeps_size_.end() && out->size() != keep->second) {
    return DecodeError(DecodeFailure::kTransform,
                       absl::StrCat(PipelineToText({op}), " returned ", out->cols, "x", out->rows,
                                    " pixels; the pipeline's output size is fixed at ", keep->second.width, "x",
                                    keep->second.height, " before it and no later op sets a size"));
  }
  image = std::move(*out);
  return absl::OkStatus();
}

absl::Status Pipeline::Store(const cv::Mat& image, uint8_t* dst) const {
  const int h = out_height_, w = out_width_;
  // A float image was normalised offline (a sample stored by a prefix that
  // ends in normalize): only the layout and dtype are left to do.
  const bool normalised = image.type() == CV_32FC3 && normalize_;
  if (image.rows != h || image.cols != w || (image.type() != CV_8UC3 && !normalised)) {
    return DecodeError(DecodeFailure::kCorrupt,
                       absl::StrCat("the pipeline produced ", image.cols, "x", image.rows, " pixels of type ",
                                    image.type(), "; expected ", w, "x", h, " 8-bit RGB"));
  }
  if (dtype_ == v1::UINT8) {
    if (layout_ == v1::NHWC) {
      for (int y = 0; y < h; ++y) std::memcpy(dst + int64_t{y} * w * 3, image.ptr<uint8_t>(y), size_t(w) * 3);
      return absl::OkStatus();
    }
    const int64_t plane = int64_t{h} * w;
    for (int y = 0; y < h; ++y) {
      const uint8_t* row = image.ptr<uint8_t>(y);
      for (int x = 0; x < w; ++x) {
        for (int c = 0; c < 3; ++c) dst[c * plane + int64_t{y} * w + x] = row[x * 3 + c];
      }
    }
    return absl::OkStatus();
  }
  const cv::Mat f = normalised ? image : Normalized(image);
  const int depth = dtype_ == v1::FLOAT16 ? CV_16F : CV_32F;
  const size_t element = dtype_ == v1::FLOAT16 ? 2 : 4;
  if (layout_ == v1::NHWC) {
    cv::Mat out(h, w, CV_MAKETYPE(depth, 3), dst);
    f.convertTo(out, depth);  // writes into dst: same size and type
    return absl::OkStatus();
  }
  std::vector<cv::Mat> planes;
  for (int c = 0; c < 3; ++c) planes.emplace_back(h, w, depth, dst + c * int64_t{h} * w * element);
  std::vector<cv::Mat> channels;
  cv::split(f, channels);
  for (int c = 0; c < 3; ++c) channels[c].convertTo(planes[c], depth);
  return absl::OkStatus();
}

}  // namespace stoker
