// One op of a pipeline checked and completed with its defaults (the built-in
// ops here, registered families through op_registry.h, plugin ops through
// their plugin): what Pipeline::Create runs on each op.
#include "dataplane/pipeline_checks.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "common/pipeline_text.h"
#include "dataplane/detection_ops.h"
#include "dataplane/geometric_ops.h"
#include "dataplane/op_registry.h"
#include "dataplane/op_plugins.h"
#include "dataplane/python_stage.h"
#include "dataplane/transforms.h"
#include "dataplane/video_ops.h"

namespace stoker {

namespace {

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

}  // namespace

BuiltInOpInfo BuiltInOp(v1::Op::OpCase op) {
  constexpr const char* kMoved = "moved with the pixels";
  switch (op) {
    case v1::Op::kRandomResizedCrop:
      return {"transforms.RandomResizedCrop", kMoved};
    case v1::Op::kCenterCrop:
      return {"transforms.CenterCrop", kMoved};
    case v1::Op::kResize:
      return {"transforms.Resize (int size: the shorter side)", kMoved};
    case v1::Op::kRandomHorizontalFlip:
      return {"transforms.RandomHorizontalFlip", kMoved};
    case v1::Op::kRandomVerticalFlip:
      return {"transforms.RandomVerticalFlip", kMoved};
    case v1::Op::kColorJitter:
      return {"transforms.ColorJitter", "untouched"};
    case v1::Op::kNormalize:
      return {"transforms.Normalize (on the client's device)", "untouched"};
    case v1::Op::kResizePad:
      return {"none (letterbox: Resize of the longer side + Pad)", kMoved};
    case v1::Op::kRandomIouCrop:
      return {"transforms.v2.RandomIoUCrop", kMoved};
    case v1::Op::kVideoClip:
      return {"none (torchvision.io.read_video + clip sampling)", ""};
    case v1::Op::kAudio:
      return {"torchaudio.load + transforms.Resample (libswresample), a window", ""};
    case v1::Op::kMelSpectrogram:
      return {"torchaudio.transforms.MelSpectrogram (+ AmplitudeToDB with log)", ""};
    default:
      return {nullptr, nullptr};
  }
}

bool PluginOpIsRandom(const v1::Op& op, const UserOps& user) {
  const StokerOpInfo* info = user.plugins ? user.plugins->Find(op.plugin().name()) : nullptr;
  return info == nullptr || info->random != 0 || (op.plugin().has_p() && op.plugin().p() < 1);
}

absl::Status CheckPipelineOp(const std::string& where, v1::Op& op, bool& fixed, int& h, int& w, const UserOps& user,
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

}  // namespace stoker
