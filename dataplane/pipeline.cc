#include "dataplane/pipeline.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/pipeline_text.h"
#include "dataplane/audio_decoder.h"
#include "dataplane/dataset.h"
#include "dataplane/image_decoder.h"
#include "dataplane/media_loader.h"
#include "dataplane/decoder_threads.h"
#include "dataplane/video_decoder.h"
#include "dataplane/video_ops.h"
#include "dataplane/detection_ops.h"
#include "dataplane/geometric_ops.h"
#include "dataplane/op_registry.h"
#include "dataplane/op_plugins.h"
#include "dataplane/python_stage.h"
#include "dataplane/resample.h"
#include "dataplane/transforms.h"
#include <opencv2/imgproc.hpp>

namespace stoker {

void ApplyColorJitter(const v1::ColorJitter& o, cv::Mat& image, Rng& rng);

namespace {

// A video's audio track (AUDIO_TRACK): decoded and resampled as the clip
// asks, then a window of audio_seconds from each of `starts` (seconds in the
// container's timeline), zeros outside the stream; float32 [K, C, L] to
// *out. No audio stream: missing_field.
absl::Status AudioTrack(absl::string_view encoded, const v1::VideoClip& clip, const std::vector<double>& starts,
                        const VideoLimits& limits, std::string* out) {
  AudioDecodeOptions options;
  options.rate = clip.audio_rate();
  options.channels = clip.audio_channels();
  options.max_seconds = limits.max_seconds;
  options.max_wall_seconds = limits.max_wall_seconds;
  absl::StatusOr<Waveform> wave = DecodeAudio(encoded, options);
  if (!wave.ok()) {
    if (absl::StrContains(wave.status().message(), "has no audio stream")) {
      return DecodeError(DecodeFailure::kMissingField,
                         absl::StrCat("a field of kind audio: ", wave.status().message()));
    }
    return wave.status();
  }
  const int64_t window = std::llround(double{clip.audio_seconds()} * clip.audio_rate());
  const int channels = clip.audio_channels();
  out->assign(starts.size() * static_cast<size_t>(channels) * static_cast<size_t>(window) * sizeof(float), '\0');
  auto* dst = reinterpret_cast<float*>(out->data());
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t first = std::llround((starts[k] - wave->start_seconds) * clip.audio_rate());
    for (int c = 0; c < channels; ++c) {
      const float* src = wave->samples.data() + static_cast<int64_t>(c) * wave->frames;
      float* row = dst + (static_cast<int64_t>(k) * channels + c) * window;
      const int64_t from = std::max<int64_t>(0, -first), to = std::min<int64_t>(window, wave->frames - first);
      for (int64_t i = from; i < to; ++i) row[i] = src[first + i];
    }
  }
  return absl::OkStatus();
}

// The sample field (kind image) of an audio or video session: the source's
// own member, or members with extensions in `allowed` (with the dot).
absl::Status CheckMediaMembers(const v1::FieldSpec& f, const std::set<std::string>& allowed, const char* first_op) {
  if (f.kind() != v1::IMAGE) return absl::OkStatus();
  for (const std::string& ext : f.extensions()) {
    if (allowed.count("." + ext) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("field '", f.name(), "' is the sample, read from member '.", ext,
                                                     "'; the sample of a ", first_op,
                                                     " pipeline is a member with one of: ", absl::StrJoin(allowed, " ")));
    }
  }
  return absl::OkStatus();
}


absl::Status CheckSide(const std::string& field, int value) {
  if (value < 1 || value > kMaxImageSide) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " = ", value, "; allowed range is 1..", kMaxImageSide, " pixels"));
  }
  return absl::OkStatus();
}

absl::Status CheckIouCrop(const std::string& where, v1::RandomIoUCrop& o) {
  if (o.min_scale() == 0) o.set_min_scale(0.3f);
  if (o.max_scale() == 0) o.set_max_scale(1.0f);
  if (o.min_aspect_ratio() == 0) o.set_min_aspect_ratio(0.5f);
  if (o.max_aspect_ratio() == 0) o.set_max_aspect_ratio(2.0f);
  if (o.sampler_options().empty()) {
    for (float v : {0.0f, 0.1f, 0.3f, 0.5f, 0.7f, 0.9f, 1.0f}) o.add_sampler_options(v);
  }
  if (o.trials() == 0) o.set_trials(40);
  if (!(o.min_scale() > 0 && o.min_scale() <= o.max_scale() && o.max_scale() <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.random_iou_crop.scale = %g:%g; need 0 < min <= max <= 1",
                                                      where, o.min_scale(), o.max_scale()));
  }
  if (!(o.min_aspect_ratio() > 0 && o.min_aspect_ratio() <= o.max_aspect_ratio() && o.max_aspect_ratio() <= 100)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.random_iou_crop.aspect_ratio = %g:%g; need 0 < min <= max <= 100", where, o.min_aspect_ratio(),
        o.max_aspect_ratio()));
  }
  if (o.trials() < 1 || o.trials() > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".random_iou_crop.trials = ", o.trials(), "; allowed 1..1000"));
  }
  if (o.sampler_options_size() > 32) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".random_iou_crop has ", o.sampler_options_size(),
                                                   " sampler options; at most 32"));
  }
  for (float v : o.sampler_options()) {
    if (!(v >= 0 && v <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s.random_iou_crop.sampler_options has %g; each in 0..1 (1: no crop)", where, v));
    }
  }
  return absl::OkStatus();
}

// A plugin op: the plugin checks its arguments (making the instance the
// pipeline keeps, *plugin); its output size.
absl::Status CheckPluginOp(const std::string& where, v1::Op& op, bool& fixed, int& h, int& w, const UserOps& user,
                           std::shared_ptr<const PluginInstance>* plugin) {
  absl::StatusOr<std::shared_ptr<const PluginInstance>> instance = PluginInstance::Create(where, op.plugin(), user);
  if (!instance.ok()) return instance.status();
  *plugin = *instance;
  int oh = 0, ow = 0;
  switch ((*instance)->OutputSize(&oh, &ow)) {
    case STOKER_SIZE_FIXED:
      if (oh < 1 || ow < 1 || oh > kMaxImageSide || ow > kMaxImageSide) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".", op.plugin().name(), " makes ", ow, "x", oh,
                                                       " pixels; each side must be 1..", kMaxImageSide));
      }
      fixed = true;
      h = oh;
      w = ow;
      break;
    case STOKER_SIZE_VARIES:
      fixed = false;
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

bool PluginOpIsRandom(const v1::Op& op, const UserOps& user) {
  const StokerOpInfo* info = user.plugins ? user.plugins->Find(op.plugin().name()) : nullptr;
  return info == nullptr || info->random != 0 || (op.plugin().has_p() && op.plugin().p() < 1);
}

// Fills defaults and validates one op. `fixed` tells whether the output size
// is fixed after this op; a plugin op's instance goes to *plugin.
absl::Status CheckOp(const std::string& where, v1::Op& op, bool& fixed, int& h, int& w, const UserOps& user,
                     std::shared_ptr<const PluginInstance>* plugin) {
  switch (op.op_case()) {
    case v1::Op::kPython:
      if (user.python == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " ", PipelineToText({op}),
            ": this server runs no Python transforms (the operator starts it with --python-transforms MODULES)"));
      }
      return user.python->Check(where, op.python());  // the size stays as it was (checked when it runs)
    case v1::Op::kPlugin:
      return CheckPluginOp(where, op, fixed, h, w, user, plugin);
    case v1::Op::kRandomResizedCrop: {
      auto& o = *op.mutable_random_resized_crop();
      if (o.scale_min() == 0) o.set_scale_min(0.08f);
      if (o.scale_max() == 0) o.set_scale_max(1.0f);
      if (o.ratio_min() == 0) o.set_ratio_min(3.0f / 4.0f);
      if (o.ratio_max() == 0) o.set_ratio_max(4.0f / 3.0f);
      if (!o.has_antialias()) o.set_antialias(true);
      if (auto s = CheckSide(where + ".random_resized_crop.size", o.size()); !s.ok()) return s;
      if (!(o.scale_min() > 0 && o.scale_min() <= o.scale_max() && o.scale_max() <= 1)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s.random_resized_crop.scale = %g:%g; need 0 < min <= max <= 1", where, o.scale_min(),
            o.scale_max()));
      }
      if (!(o.ratio_min() >= 0.01f && o.ratio_min() <= o.ratio_max() && o.ratio_max() <= 100)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s.random_resized_crop.ratio = %g:%g; need 0.01 <= min <= max <= 100", where, o.ratio_min(),
            o.ratio_max()));
      }
      fixed = true;
      h = w = o.size();
      return absl::OkStatus();
    }
    case v1::Op::kCenterCrop:
      if (auto s = CheckSide(where + ".center_crop.size", op.center_crop().size()); !s.ok()) return s;
      fixed = true;
      h = w = op.center_crop().size();
      return absl::OkStatus();
    case v1::Op::kResize:
      fixed = false;
      if (!op.resize().has_antialias()) op.mutable_resize()->set_antialias(true);
      return CheckSide(where + ".resize.shorter_side", op.resize().shorter_side());
    case v1::Op::kColorJitter: {
      const auto& o = op.color_jitter();
      if (!(o.brightness() >= 0 && o.contrast() >= 0 && o.saturation() >= 0 && o.hue() >= 0 && o.hue() <= 0.5f)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s.color_jitter = (brightness %g, contrast %g, saturation %g, hue %g); need factors >= 0 and hue "
            "in 0..0.5",
            where, o.brightness(), o.contrast(), o.saturation(), o.hue()));
      }
      return absl::OkStatus();
    }
    case v1::Op::kNormalize: {
      const auto& o = op.normalize();
      if (o.mean_size() != 3 || o.std_size() != 3) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s.normalize has %d mean and %d std values; need 3 of each (R, G, B)", where, o.mean_size(), o.std_size()));
      }
      for (float v : o.std()) {
        if (!(v > 0)) return absl::InvalidArgumentError(absl::StrFormat("%s.normalize.std has %g; need > 0", where, v));
      }
      return absl::OkStatus();
    }
    case v1::Op::kRandomHorizontalFlip: {
      const float p = op.random_horizontal_flip().p();
      if (!(p >= 0 && p <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s.random_horizontal_flip.p = %g; allowed range is 0..1", where, p));
      }
      return absl::OkStatus();
    }
    case v1::Op::kRandomVerticalFlip: {
      const float p = op.random_vertical_flip().p();
      if (!(p >= 0 && p <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s.random_vertical_flip.p = %g; allowed range is 0..1", where, p));
      }
      return absl::OkStatus();
    }
    case v1::Op::kResizePad:
      if (!op.resize_pad().has_antialias()) op.mutable_resize_pad()->set_antialias(true);
      if (auto s = CheckSide(where + ".resize_pad.size", op.resize_pad().size()); !s.ok()) return s;
      fixed = true;
      h = w = op.resize_pad().size();
      return absl::OkStatus();
    case v1::Op::kRandomIouCrop:
      fixed = false;
      return CheckIouCrop(where, *op.mutable_random_iou_crop());
    case v1::Op::kVideoClip:
      return CheckVideoClip(where, *op.mutable_video_clip());  // each frame keeps the video's size
    case v1::Op::OP_NOT_SET:
      break;
    default:
      if (const OpEntry* entry = FindOp(op.op_case())) {  // op_registry.h
        OpShape shape{fixed, h, w};
        absl::Status s = entry->check(where, op, &shape);
        fixed = shape.fixed;
        h = shape.height;
        w = shape.width;
        return s;
      }
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(where, " has no op set"));
}

}  // namespace

absl::StatusOr<Pipeline> Pipeline::Create(const v1::SessionConfig& config, UserOps user) {
  if (config.batch_size() < 1 || config.batch_size() > kMaxBatchSize) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size = ", config.batch_size(),
                                                   "; allowed range is 1..", kMaxBatchSize));
  }
  if (!v1::DType_IsValid(config.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat("dtype = ", config.dtype(), "; supported: UINT8, FLOAT16, FLOAT32"));
  }
  if (!v1::Layout_IsValid(config.layout())) {
    return absl::InvalidArgumentError(absl::StrCat("layout = ", config.layout(), "; supported: NHWC, NCHW"));
  }
  if (config.pipeline().empty()) {
    return absl::InvalidArgumentError("pipeline is empty; it must end in a fixed size (add center_crop or random_resized_crop)");
  }
  Pipeline p;
  p.user_ = std::move(user);
  if (IsAudioPipeline(config.pipeline())) {  // audio_ops.h: the session's dtype and layout describe images
    for (const v1::FieldSpec& f : config.fields()) {
      if (f.kind() == v1::BOXES || f.kind() == v1::MASK || f.kind() == v1::MASKS || f.kind() == v1::KEYPOINTS) {
        return absl::InvalidArgumentError(absl::StrCat("field '", f.name(), "' of kind ", v1::FieldKind_Name(f.kind()),
                                                       " is an image's: an audio pipeline's sample is its audio"));
      }
      if (absl::Status s = CheckMediaMembers(f, AudioExtensions(), "audio(...)"); !s.ok()) return s;
      if (f.kind() == v1::AUDIO_TRACK) {
        return absl::InvalidArgumentError(absl::StrCat("field '", f.name(), "' of kind audio is a video's audio track; "
                                                       "an audio(...) pipeline's sample is the field of kind image"));
      }
    }
    p.ops_.assign(config.pipeline().begin(), config.pipeline().end());
    absl::StatusOr<AudioPipeline> audio = AudioPipeline::Create(&p.ops_, config.batch_size());
    if (!audio.ok()) return audio.status();
    if (config.cache_mode() == v1::CACHE_DECODED) {
      return absl::InvalidArgumentError("cache_mode CACHE_DECODED keeps decoded images; an audio session can use "
                                        "CACHE_RAW or CACHE_BATCH");
    }
    p.audio_ = std::make_shared<const AudioPipeline>(*std::move(audio));
    p.layout_ = v1::AUDIO;
    p.dtype_ = p.audio_->int16() ? v1::INT16 : v1::FLOAT32;
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
  for (int i = 0; i < config.pipeline_size(); ++i) {
    v1::Op op = config.pipeline(i);
    if (op.has_video_clip() && i > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline[", i, "].video_clip must be the first op: it decodes the sample's video into clips"));
    }
    if (auto s = p.CheckOpAt(absl::StrCat("pipeline[", i, "]"), static_cast<size_t>(i), op, fixed); !s.ok()) {
      return s;
    }
    if (op.has_normalize()) {
      if (i + 1 != config.pipeline_size()) {
        return absl::InvalidArgumentError(absl::StrCat("pipeline[", i, "].normalize must be the last op"));
      }
      if (p.dtype_ == v1::UINT8) {
        return absl::InvalidArgumentError(absl::StrCat(
            "pipeline[", i, "].normalize needs dtype FLOAT16 or FLOAT32 (or send uint8 and normalize on the GPU)"));
      }
      p.normalize_ = true;
      for (int c = 0; c < 3; ++c) {
        p.mean_[c] = op.normalize().mean(c);
        p.std_[c] = op.normalize().std(c);
      }
    }
    p.ops_.push_back(std::move(op));
  }
  if (fixed && config.batch_size() * p.sample_bytes() > kMaxBatchBytes) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size x sample bytes = ", config.batch_size(), " x ",
                                                   p.sample_bytes(), " bytes; a batch may hold at most ",
                                                   kMaxBatchBytes, " bytes"));
  }
  if (!fixed) {
    return absl::InvalidArgumentError(
        "pipeline output size is not fixed, so samples cannot be batched: add center_crop(size), "
        "random_resized_crop(size) or resize_pad(size) after the last resize or random_iou_crop");
  }
  if (!p.ops_.empty() && p.ops_[0].has_video_clip()) {
    p.video_ = true;
    std::string why;
    if (LoadMediaModule(&why) == nullptr) return absl::FailedPreconditionError(why);
    if (config.cache_mode() == v1::CACHE_DECODED) {
      return absl::InvalidArgumentError("cache_mode CACHE_DECODED keeps decoded images; a video_clip session can "
                                        "use CACHE_RAW or CACHE_BATCH");
    }
    for (const v1::FieldSpec& f : config.fields()) {
      if (f.kind() == v1::BOXES || f.kind() == v1::MASK || f.kind() == v1::MASKS || f.kind() == v1::KEYPOINTS) {
        return absl::InvalidArgumentError(absl::StrCat("field '", f.name(), "' of kind ", v1::FieldKind_Name(f.kind()),
                                                       ": a video_clip pipeline's sample is its clips"));
      }
      if (absl::Status s = CheckMediaMembers(f, VideoExtensions(), "video_clip(...)"); !s.ok()) return s;
    }
    if (p.has_user_ops()) {
      return absl::InvalidArgumentError("python(...) and plugin ops do not run on video clips yet");
    }
    if (absl::Status s = p.CheckAudioTrack(config); !s.ok()) return s;
    if (config.batch_size() * p.sample_bytes() > kMaxBatchBytes) {
      return absl::InvalidArgumentError(absl::StrCat("batch_size x sample bytes = ", config.batch_size(), " x ",
                                                     p.sample_bytes(), " bytes; a batch may hold at most ",
                                                     kMaxBatchBytes, " bytes"));
    }
  }
  if (!p.video_) {
    for (const v1::FieldSpec& f : config.fields()) {
      if (f.kind() == v1::AUDIO_TRACK) {
        return absl::InvalidArgumentError(absl::StrCat("field '", f.name(), "' of kind audio is a video's audio "
                                                       "track: the pipeline must start with video_clip(...)"));
      }
    }
  }
  const bool has_boxes = std::any_of(config.fields().begin(), config.fields().end(),
                                     [](const v1::FieldSpec& f) { return f.kind() == v1::BOXES; });
  const bool has_targets = std::any_of(config.fields().begin(), config.fields().end(), [](const v1::FieldSpec& f) {
    return f.kind() == v1::BOXES || f.kind() == v1::MASK || f.kind() == v1::MASKS || f.kind() == v1::KEYPOINTS;
  });
  for (int i = 0; i < config.pipeline_size(); ++i) {
    if (config.pipeline(i).has_random_iou_crop() && !has_boxes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline[", i, "].random_iou_crop chooses its crop by the boxes: the session needs a field of kind boxes"));
    }
    if (has_targets && (config.pipeline(i).has_python() || config.pipeline(i).has_plugin())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline[", i, "] ", PipelineToText({config.pipeline(i)}),
          " cannot move boxes, masks or keypoints yet: a session with target fields cannot use user ops"));
    }
    const OpEntry* entry = FindOp(config.pipeline(i).op_case());
    if (has_targets && entry != nullptr && entry->targets == OpTargets::kRefused) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline[", i, "].", v1::Op::descriptor()->FindFieldByNumber(config.pipeline(i).op_case())->name(),
          " cannot move boxes, masks or keypoints (it blends differently warped copies): a session with target fields"
          " cannot use it"));
    }
  }
  return p;
}

absl::Status Pipeline::CheckAudioTrack(const v1::SessionConfig& config) {
  int tracks = 0;
  for (const v1::FieldSpec& f : config.fields()) {
    if (f.kind() != v1::AUDIO_TRACK) continue;
    ++tracks;
    if (!f.extensions().empty() || !f.json_path().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("field '", f.name(),
                                                     "' (audio) is the video's own audio track: give it no member "
                                                     "extension or json path"));
    }
  }
  if (tracks == 0) return absl::OkStatus();
  if (tracks > 1) return absl::InvalidArgumentError("at most one field of kind audio (the video's audio track)");
  v1::VideoClip& clip = *ops_[0].mutable_video_clip();
  if (clip.audio_rate() == 0) clip.set_audio_rate(16000);
  if (clip.audio_channels() == 0) clip.set_audio_channels(1);
  if (clip.audio_rate() < 1000 || clip.audio_rate() > 384000) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline[0].video_clip.audio_rate = ", clip.audio_rate(), "; allowed range is 1000..384000"));
  }
  if (clip.audio_channels() < 1 || clip.audio_channels() > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline[0].video_clip.audio_channels = ", clip.audio_channels(), "; allowed range is 1..8"));
  }
  const int64_t window = std::llround(double{clip.audio_seconds()} * clip.audio_rate());
  if (!(clip.audio_seconds() > 0) || clip.audio_seconds() > 600 || window < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline[0].video_clip.audio_seconds = ", clip.audio_seconds(),
        ": a field of kind audio needs each clip's window length, 0..600 s (e.g. video_clip(frames=16, "
        "audio_seconds=1.0))"));
  }
  audio_track_shape_.clear();
  if (clip.clips() > 1) audio_track_shape_.push_back(clip.clips());
  audio_track_shape_.insert(audio_track_shape_.end(), {int64_t{clip.audio_channels()}, window});
  const int64_t bytes = int64_t{clip.clips()} * clip.audio_channels() * window * 4;
  if (config.batch_size() * (sample_bytes() + bytes) > kMaxBatchBytes) {
    return absl::InvalidArgumentError(absl::StrCat("batch_size x (clip bytes + audio bytes) = ", config.batch_size(),
                                                   " x (", sample_bytes(), " + ", bytes,
                                                   "); a batch may hold at most ", kMaxBatchBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Pipeline> Pipeline::CreatePrefix(const std::vector<v1::Op>& ops, UserOps user) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].has_audio() || ops[i].has_mel_spectrogram() || ops[i].has_video_clip()) {
      return absl::InvalidArgumentError(absl::StrCat("prefix[", i, "] ", PipelineToText({ops[i]}),
                                                     ": audio and video pipelines are not materialised"));
    }
  }
  Pipeline p;
  p.user_ = std::move(user);
  bool fixed = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    v1::Op op = ops[i];
    const std::string where = absl::StrCat("prefix[", i, "]");
    if (auto s = p.CheckOpAt(where, i, op, fixed); !s.ok()) return s;
    const OpEntry* entry = FindOp(op.op_case());
    if (op.has_python() || (op.has_plugin() && PluginOpIsRandom(op, p.user_)) || op.has_random_resized_crop() || op.has_random_horizontal_flip() || op.has_color_jitter() ||
        op.has_random_vertical_flip() || op.has_random_iou_crop() || (entry != nullptr && entry->random(op))) {
      return absl::InvalidArgumentError(absl::StrCat(where, " ", PipelineToText({op}),
                                                     " is random: random ops stay online (after the prefix)"));
    }
    if (op.has_normalize()) {
      if (i + 1 != ops.size()) {
        return absl::InvalidArgumentError(absl::StrCat(where, " normalize must be the last op of the prefix"));
      }
      p.normalize_ = true;
      p.dtype_ = v1::FLOAT32;
      for (int c = 0; c < 3; ++c) {
        p.mean_[c] = op.normalize().mean(c);
        p.std_[c] = op.normalize().std(c);
      }
    }
    p.ops_.push_back(std::move(op));
  }
  return p;
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

int DctScaleFor(int crop, int out, bool antialias) {
  // libjpeg-turbo has SIMD inverse DCTs for 8/8, 4/8, 2/8 and 1/8 only; the
  // other M/8 use slow C code that costs more than the pixels they save
  // (measured with callgrind on the standard photo set).
  //
  // Not with antialias: a scaled IDCT is not the widened filter, and it put
  // 3-5 % of the pixels more than 2 levels from PIL's antialiased resample
  // even where 4x of the shrink was left to the filter (measured on the
  // photo set; python/tests/test_antialias.py holds the bound).
  if (antialias) return 8;
  for (int m : {1, 2, 4}) {
    if (int64_t{crop} * m >= int64_t{8} * out) return m;
  }
  return 8;
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

absl::Status Pipeline::ProduceVideo(absl::string_view encoded, Rng& rng, const VideoLimits& limits, uint8_t* dst,
                                    SampleTimes* times, std::string* audio_track, const VideoIndex* known) const {
  if (!video_) return absl::FailedPreconditionError("not a video_clip pipeline");
  const absl::Time t0 = absl::Now();
  // One time limit for the whole sample: the index and every clip's decode.
  const absl::Time deadline = limits.max_wall_seconds > 0 ? t0 + absl::Seconds(limits.max_wall_seconds)
                                                          : absl::InfiniteFuture();
  auto within = [&]() -> absl::StatusOr<VideoLimits> {
    VideoLimits l = limits;
    if (deadline == absl::InfiniteFuture()) return l;
    l.max_wall_seconds = absl::ToDoubleSeconds(deadline - absl::Now());
    if (l.max_wall_seconds <= 0) {
      return DecodeError(DecodeFailure::kCorrupt,
                         absl::StrCat("decoding the clips took longer than ", limits.max_wall_seconds, " s"));
    }
    return l;
  };
  absl::StatusOr<VideoLimits> now = within();
  if (!now.ok()) return now.status();
  absl::StatusOr<VideoIndex> index = known != nullptr ? *known : IndexVideo(encoded, *now);
  times->decode += absl::Now() - t0;
  if (!index.ok()) return index.status();
  const v1::VideoClip& clip = ops_[0].video_clip();
  const std::vector<int64_t> frames = ClipFrames(clip, static_cast<int64_t>(index->pts.size()), rng);
  const int T = clip.frames();
  const size_t rgb_bytes = static_cast<size_t>(index->width) * static_cast<size_t>(index->height) * 3;
  if (rgb_bytes * static_cast<size_t>(T) > kMaxClipBytes) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat("a clip of ", T, " frames of ", index->width, "x", index->height, " is ",
                                    rgb_bytes * static_cast<size_t>(T), " bytes decoded; at most ", kMaxClipBytes));
  }
  if (!audio_track_shape_.empty() && audio_track != nullptr) {
    const absl::Time t1 = absl::Now();
    now = within();
    if (!now.ok()) return now.status();
    std::vector<double> starts;  // each clip's first frame, in seconds
    for (int k = 0; k < clip.clips(); ++k) {
      starts.push_back(static_cast<double>(index->pts[static_cast<size_t>(frames[static_cast<size_t>(k * T)])]) *
                       index->seconds_per_tick);
    }
    absl::Status s = AudioTrack(encoded, clip, starts, *now, audio_track);
    times->decode += absl::Now() - t1;
    if (!s.ok()) return s;
  }
  std::vector<uint8_t> rgb(rgb_bytes * static_cast<size_t>(T));
  for (int k = 0; k < clip.clips(); ++k) {
    std::vector<int64_t> pts(static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) pts[t] = index->pts[static_cast<size_t>(frames[static_cast<size_t>(k * T + t)])];
    const absl::Time t1 = absl::Now();
    now = within();
    if (!now.ok()) return now.status();
    absl::Status decoded;
    {
      const DecoderThreadShare share(limits.decoder_threads, limits.decoder_thread_budget);
      now->decoder_threads = share.threads();
      decoded = DecodeVideoFrames(encoded, *now, pts, index->width, index->height, rgb.data());
    }
    const absl::Time t2 = absl::Now();
    times->decode += t2 - t1;
    if (!decoded.ok()) return decoded;
    // One draw for the clip: every frame replays the same random stream.
    const Rng clip_rng(rng.Next());
    for (int t = 0; t < T; ++t) {
      cv::Mat frame(index->height, index->width, CV_8UC3, rgb.data() + static_cast<size_t>(t) * rgb_bytes);
      Rng r = clip_rng;
      absl::StatusOr<cv::Mat> out = Apply(frame, r, 1, limits.max_pixels);
      if (!out.ok()) return out.status();
      if (absl::Status s = Store(*out, dst + static_cast<size_t>(k * T + t) * static_cast<size_t>(frame_bytes()));
          !s.ok()) {
        return s;
      }
    }
    times->augment += absl::Now() - t2;
  }
  return absl::OkStatus();
}

namespace {

// The pixels resize(shorter_side) makes of a height x width image, against the limit.
absl::Status CheckResize(int64_t height, int64_t width, int64_t shorter_side, int64_t max_pixels) {
  const int64_t s = std::min(height, width), l = std::max(height, width);
  if (s <= 0) return absl::OkStatus();
  const double long_side = static_cast<double>(shorter_side) * static_cast<double>(l) / static_cast<double>(s);
  const double pixels = long_side * static_cast<double>(shorter_side);
  const double limit = max_pixels > 0 ? static_cast<double>(max_pixels) : static_cast<double>(INT32_MAX);
  if (pixels > limit) {
    return DecodeError(DecodeFailure::kTooLarge,
                       absl::StrCat("resize(", shorter_side, ") of ", width, "x", height, " would make ",
                                    static_cast<int64_t>(pixels), " pixels; --max-pixels is ", max_pixels));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Pipeline::ProduceAudio(absl::string_view encoded, Rng& rng, double max_seconds, uint8_t* dst,
                                    SampleTimes* times) const {
  if (!audio_) return absl::FailedPreconditionError("not an audio pipeline");
  return audio_->Produce(encoded, rng, max_seconds, dst, times);
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
  // Fuse the first op with decoding: decode only its region, shrunk in the
  // DCT domain when it is at least twice the size it is resized to.
  CropBox region;
  int scale = 8;  // eighths: full size
  size_t next_op = first_op;
  static const v1::Op kNoOp;
  const v1::Op& first = first_op < ops_.size() ? ops_[first_op] : kNoOp;
  if (first.has_random_resized_crop()) {
    const auto& o = first.random_resized_crop();
    region = RandomResizedCropBox(info->height, info->width, o.scale_min(), o.scale_max(), o.ratio_min(),
                                  o.ratio_max(), rng);
    scale = DctScaleFor(std::min(region.height, region.width), o.size(), o.antialias());
    next_op = first_op + 1;
  } else if (first.has_center_crop() && info->height >= first.center_crop().size() &&
             info->width >= first.center_crop().size()) {
    region = CenterCropBox(info->height, info->width, first.center_crop().size());
    next_op = first_op + 1;
  } else if (first.has_resize()) {
    scale = DctScaleFor(std::min(info->height, info->width), first.resize().shorter_side(),
                        first.resize().antialias());
    next_op = first_op + 1;
  }
  absl::StatusOr<cv::Mat> decoded = DecodeImage(encoded, region, scale, max_pixels);
  if (!decoded.ok()) return decoded.status();
  const absl::Time t1 = absl::Now();
  cv::Mat image = *std::move(decoded);
  if (geometry != nullptr && region.width > 0) geometry->Step(GeometryStep::Crop(region));
  if (first.has_random_resized_crop()) {
    const auto& o = first.random_resized_crop();
    image = Resample(image, cv::Size(o.size(), o.size()), o.interpolation(), o.antialias());
    if (geometry != nullptr) geometry->Step(GeometryStep::Resize(o.size(), o.size()));
  } else if (first.has_resize()) {
    // The target size comes from the original dimensions, not the scaled ones.
    if (absl::Status s = CheckResize(info->height, info->width, first.resize().shorter_side(), max_pixels); !s.ok()) {
      return s;
    }
    const cv::Size target = ShorterSideSize(info->height, info->width, first.resize().shorter_side());
    if (target != image.size()) {
      image = Resample(image, target, first.resize().interpolation(), first.resize().antialias());
    }
    if (geometry != nullptr) geometry->Step(GeometryStep::Resize(target.width, target.height));
  }
  UserOpIo own;
  if (io == nullptr) io = &own;
  const absl::Duration python_before = io->python_time;
  absl::StatusOr<cv::Mat> applied = Apply(std::move(image), rng, next_op, max_pixels, geometry, io);
  times->python = io->python_time - python_before;
  times->decode = t1 - t0;
  times->augment = absl::Now() - t1 - times->python;
  return applied;
}

bool Pipeline::has_user_ops() const {
  return std::any_of(ops_.begin(), ops_.end(), [](const v1::Op& op) { return op.has_python() || op.has_plugin(); });
}

absl::StatusOr<cv::Mat> Pipeline::Apply(cv::Mat image, Rng& rng, size_t first_op, int64_t max_pixels,
                                        GeometrySink* geometry, UserOpIo* io) const {
  if (audio_) return absl::FailedPreconditionError("an audio pipeline makes no image");
  auto step = [&](const GeometryStep& s) {
    if (geometry != nullptr) geometry->Step(s);
  };
  if (geometry != nullptr && geometry->width == 0) geometry->width = image.cols, geometry->height = image.rows;
  OpContext context;
  if (normalize_) {
    std::copy(mean_, mean_ + 3, context.mean);
    std::copy(std_, std_ + 3, context.std);
  }
  for (size_t i = first_op; i < ops_.size(); ++i) {
    const v1::Op& op = ops_[i];
    switch (op.op_case()) {
      case v1::Op::kRandomResizedCrop: {
        const auto& o = op.random_resized_crop();
        const CropBox box = RandomResizedCropBox(image.rows, image.cols, o.scale_min(), o.scale_max(),
                                                 o.ratio_min(), o.ratio_max(), rng);
        image = ResizedCrop(image, box, o.size(), o.interpolation(), o.antialias());
        step(GeometryStep::Crop(box));
        step(GeometryStep::Resize(o.size(), o.size()));
        break;
      }
      case v1::Op::kCenterCrop:
        step(GeometryStep::Crop(CenterCropRegion(image.rows, image.cols, op.center_crop().size())));
        image = CenterCrop(image, op.center_crop().size());
        break;
      case v1::Op::kResize: {
        if (absl::Status s = CheckResize(image.rows, image.cols, op.resize().shorter_side(), max_pixels); !s.ok()) {
          return s;
        }
        image = ResizeShorterSide(image, op.resize().shorter_side(), op.resize().interpolation(),
                                  op.resize().antialias());
        step(GeometryStep::Resize(image.cols, image.rows));
        break;
      }
      case v1::Op::kRandomHorizontalFlip:
        // Always draw, so later ops see the same stream whatever the outcome.
        if (rng.UniformDouble() < op.random_horizontal_flip().p()) {
          FlipHorizontalInPlace(image);
          step(GeometryStep::FlipHorizontal(image.cols, image.rows));
        }
        break;
      case v1::Op::kRandomVerticalFlip:
        if (rng.UniformDouble() < op.random_vertical_flip().p()) {
          cv::flip(image, image, 0);
          step(GeometryStep::FlipVertical(image.cols, image.rows));
        }
        break;
      case v1::Op::kResizePad: {
        const auto& o = op.resize_pad();
        const cv::Size scaled = ResizePadSize(image.rows, image.cols, o.size());
        if (scaled != image.size()) {
          image = Resample(image, scaled, o.interpolation(), o.antialias());
          step(GeometryStep::Resize(scaled.width, scaled.height));
        }
        const CropBox pad{0, 0, o.size(), o.size()};
        cv::Mat padded = cv::Mat::zeros(o.size(), o.size(), image.type());
        image.copyTo(padded(cv::Rect(0, 0, image.cols, image.rows)));
        image = padded;
        step(GeometryStep::Crop(pad));
        break;
      }
      case v1::Op::kRandomIouCrop: {
        static const std::vector<float> kNoBoxes;
        const std::vector<float>& boxes =
            geometry != nullptr && geometry->targets != nullptr ? geometry->targets->boxes : kNoBoxes;
        const std::optional<CropBox> box = RandomIouCropBox(op.random_iou_crop(), image.rows, image.cols, boxes, rng);
        if (box) {
          image = image(cv::Rect(box->left, box->top, box->width, box->height)).clone();
          GeometryStep crop = GeometryStep::Crop(*box);
          crop.drop_outside_centers = true;
          step(crop);
        }
        break;
      }
      case v1::Op::kColorJitter:
        ApplyColorJitter(op.color_jitter(), image, rng);
        break;
      case v1::Op::kPython:
      case v1::Op::kPlugin:
        if (absl::Status s = ApplyUserOp(i, image, rng, max_pixels, io); !s.ok()) return s;
        break;
      case v1::Op::kNormalize:  // applied by Store, with the dtype conversion
      case v1::Op::OP_NOT_SET:
        break;
      default:
        if (const OpEntry* entry = FindOp(op.op_case())) {
          const cv::Size padded = PaddedSize(op, image.size());
          const int64_t pixels = int64_t{padded.width} * padded.height;
          if (pixels > (max_pixels > 0 ? max_pixels : int64_t{1} << 28)) {
            return DecodeError(DecodeFailure::kTooLarge,
                               absl::StrCat(PipelineToText({op}), " of ", image.cols, "x", image.rows, " would make ",
                                            padded.width, "x", padded.height, " pixels; --max-pixels is ", max_pixels));
          }
          entry->apply(op, image, rng, context, geometry);
        }
        break;
    }
  }
  return image;
}

void Pipeline::NoteSize(size_t i, const v1::Op& op, bool fixed_before, cv::Size before, bool fixed_after,
                        cv::Size after) {
  // An op that sets the size (or changes it) frees the user ops before it.
  int unused_h = 0, unused_w = 0;
  const bool plugin_fixed =
      op.has_plugin() && plugin_ops_.at(i)->OutputSize(&unused_h, &unused_w) == STOKER_SIZE_FIXED;
  const bool sets_size = op.has_random_resized_crop() || op.has_center_crop() || op.has_resize_pad() ||
                         op.has_random_crop() || plugin_fixed || !fixed_after || after != before || !fixed_before;
  if (sets_size) keeps_size_.clear();
  // A user op must make the size the checks assumed: its declared size (a
  // plugin's fixed output), or the size it was given when that was fixed.
  if ((op.has_python() || op.has_plugin()) && fixed_after && (fixed_before || plugin_fixed)) keeps_size_[i] = after;
}

absl::Status Pipeline::CheckOpAt(const std::string& where, size_t i, v1::Op& op, bool& fixed) {
  const bool fixed_before = fixed;
  const cv::Size before(out_width_, out_height_);
  std::shared_ptr<const PluginInstance> plugin;
  if (absl::Status s = CheckOp(where, op, fixed, out_height_, out_width_, user_, &plugin); !s.ok()) return s;
  if (plugin != nullptr) plugin_ops_[i] = std::move(plugin);
  NoteSize(i, op, fixed_before, before, fixed, cv::Size(out_width_, out_height_));
  return absl::OkStatus();
}

absl::Status Pipeline::ApplyUserOp(size_t i, cv::Mat& image, Rng& rng, int64_t max_pixels, UserOpIo* io) const {
  const v1::Op& op = ops_[i];
  const int64_t limit = max_pixels > 0 ? max_pixels : int64_t{1} << 28;
  absl::StatusOr<cv::Mat> out;
  if (op.has_python()) {
    if (!PassesGate(op.python().has_p(), op.python().p(), 1, rng)) return absl::OkStatus();
    if (user_.python == nullptr) return DecodeError(DecodeFailure::kTransform, "python ops need a Python stage");
    const absl::Time t0 = absl::Now();
    out = user_.python->Run(op.python(), i, rng.origin(), image, limit, io);
    if (io != nullptr) io->python_time += absl::Now() - t0;
  } else {
    if (!PassesGate(op.plugin().has_p(), op.plugin().p(), 1, rng)) return absl::OkStatus();
    out = plugin_ops_.at(i)->Apply(image, rng, limit, io);
  }
  if (!out.ok()) return out.status();
  if (auto keep = keeps_size_.find(i); keep != keeps_size_.end() && out->size() != keep->second) {
    return DecodeError(DecodeFailure::kTransform,
                       absl::StrCat(PipelineToText({op}), " returned ", out->cols, "x", out->rows,
                                    " pixels; the pipeline's output size is fixed at ", keep->second.width, "x",
                                    keep->second.height, " before it and no later op sets a size"));
  }
  image = *std::move(out);
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

void ApplyColorJitter(const v1::ColorJitter& o, cv::Mat& image, Rng& rng) {
  // A random order of the four adjustments, then their factors in a fixed
  // order, as torchvision's ColorJitter.get_params.
  int order[4] = {0, 1, 2, 3};
  for (int i = 3; i > 0; --i) std::swap(order[i], order[rng.UniformInt(0, i)]);
  auto factor = [&](float x) { return rng.Uniform(std::max(0.0, 1.0 - x), 1.0 + x); };
  const double b = o.brightness() > 0 ? factor(o.brightness()) : 1;
  const double c = o.contrast() > 0 ? factor(o.contrast()) : 1;
  const double s = o.saturation() > 0 ? factor(o.saturation()) : 1;
  const double h = o.hue() > 0 ? rng.Uniform(-o.hue(), o.hue()) : 0;
  for (int fn : order) {
    if (fn == 0 && o.brightness() > 0) AdjustBrightness(image, b);
    if (fn == 1 && o.contrast() > 0) AdjustContrast(image, c);
    if (fn == 2 && o.saturation() > 0) AdjustSaturation(image, s);
    if (fn == 3 && o.hue() > 0) AdjustHue(image, h);
  }
}

}  // namespace stoker
