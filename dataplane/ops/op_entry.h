// What one op is, as an entry of the op registry (op_registry.h) says it:
// how the text form reads and prints it, how Pipeline::Create checks it and
// fills its defaults, whether it draws random numbers, how Pipeline::Apply
// runs it, what it does to targets; and the checks and gates the families'
// entries share. The families (core_ops.cc, photometric_ops.h, ...) write
// entries with these; the registry only gathers them. Value types and pure
// functions; thread-safe.
#ifndef STOKER_DATAPLANE_OPS_OP_ENTRY_H_
#define STOKER_DATAPLANE_OPS_OP_ENTRY_H_

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rng.h"
#include "dataplane/base/crop_box.h"
#include "dataplane/sample/geometry.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// The largest side, in pixels, of every size argument (a session limit, part
// of the documented contract; pipeline.h lists the others).
inline constexpr int kMaxImageSide = 8192;

// What an op may need to know about the pipeline it runs in.
struct OpContext {
  // The pipeline's normalize op (mean, std per channel, 0..1 units), or
  // ImageNet's when it has none.
  float mean[3] = {0.485f, 0.456f, 0.406f};
  float std[3] = {0.229f, 0.224f, 0.225f};
};

// The pipeline's output size as its ops are checked: `fixed` once an op
// makes a known size (height x width), unset by one that makes a size that
// depends on the input.
struct OpShape {
  bool fixed = false;
  int height = 0, width = 0;
};

// What an op does to a sample's targets (boxes, masks, keypoints).
enum class OpTargets {
  kUntouched,  // photometric: the pixels stay where they are
  kMoved,      // crops, pads, flips, warps and the policies: moved with the pixels (geometry.h)
  kRefused,    // augmix (its rules say why), the user ops (their own message): refused with targets
  kNone,       // audio and video ops: their samples carry no targets
};

// The pixels a registered op would make of an input of `input` size, against
// --max-pixels (0: 2^28): a DecodeError(kTooLarge) naming the op and sizes.
// The default reads PaddedSize: the pads grow the image (defined beside it in
// geometric_ops.cc).
absl::Status LimitPaddedPixels(const v1::Op& op, cv::Size input, int64_t max_pixels);

// An op's arguments in the text form, "name(positional, ..., name=value)".
// By default (no `arguments`) they are its message's fields in declaration
// order, a pair NAME_min, NAME_max being one argument NAME=lo:hi, printed by
// name when set, floats in the shortest form that reads back.
struct OpText {
  struct Argument {
    const char* name;
    const char* field;          // the message's field it sets
    const char* max = nullptr;  // with `field`: a range name=lo:hi of two fields
  };
  std::vector<Argument> arguments;  // in positional order
  // The first ops keep the text they had before the text form was read from
  // stoker.proto (materialised datasets' manifests and the raw cache's
  // fingerprints hold it): their first `bare` arguments print always and
  // without their names, floats print as %g (6 digits), and an optional bool
  // (antialias, on by default) prints only when false.
  int bare = 0;
  bool first_ops_style = false;
};

// One numeric or bool field of an op's message, declared as data: the
// values it allows (lo..hi, inclusive; each value of a repeated field), its
// default and its unit. CheckOp (op_registry.h) fills the default where the field is unset
// (a field with presence: optional) or 0 (one without: "0 means the
// default"), and refuses a value outside lo..hi as "WHERE.OP.FIELD = V;
// allowed range is LO..HI UNIT" ("WHERE.OP.FIELD has V; each in LO..HI" for
// a repeated field); the default itself is always allowed (a sentinel such
// as augmix's chain_depth -1, "random"). The text form's messages, the reference page
// (tools/stoker-pipeline-reference) and op_params_test.cc read the same
// declaration. A rule between fields (min <= max, an odd kernel) stays in
// the entry's `check`.
inline constexpr double kNoDefault = std::numeric_limits<double>::quiet_NaN();
struct OpParam {
  const char* field;
  double lo, hi;
  double fallback = kNoDefault;  // the default (NaN: none; a bool's is 0 or 1)
  const char* unit = "";         // e.g. "pixels"
  bool above_lo = false;         // lo itself refused: (lo, hi]
  // What the parameter means: a declared op's (OpEntry::name) reference
  // page reads it; the others' meanings are stoker.proto's comments.
  const char* help = "";
  // A declared op's value type (a message op's is its field's): kInteger
  // refuses a value that is not whole, and the grammar calls it "int".
  enum Type { kReal, kInteger };
  Type type = kReal;
};

struct UserOps;        // user_ops.h: the server's Python stage and plugins
struct UserOpIo;       // user_ops.h
class PluginInstance;  // op_plugins.h

// A user op's part of its entry (python(...) and plugin ops): what the
// server loaded for it (its Python stage, its plugin) checks and runs it,
// and its text form is its own. The pipeline holds the per-op state a run
// needs (`plugin`: the instance the check made).
struct UserOpHooks {
  // Whether the text form's op `name` is this user op's (python; team.op).
  bool (*reads)(absl::string_view name);
  // `open`: the position of '(' in `text`, or npos (no arguments).
  absl::StatusOr<v1::Op> (*parse)(const std::string& name, absl::string_view text, size_t open);
  std::string (*print)(const v1::Op& op);
  // Checks `op` against `user`, updating `shape`; a plugin op's instance goes to *plugin.
  absl::Status (*check)(const std::string& where, v1::Op& op, OpShape* shape, const UserOps& user,
                        std::shared_ptr<const PluginInstance>* plugin);
  // Whether the (checked) op draws random numbers, as `user` says.
  bool (*random)(const v1::Op& op, const UserOps& user);
  // Runs the op (its gate included; `position`: its place in the pipeline)
  // on `image`, within `max_pixels`: its result, or none when the gate
  // skipped it.
  absl::StatusOr<std::optional<cv::Mat>> (*run)(const v1::Op& op, const UserOps& user, const PluginInstance* plugin,
                                                size_t position, const cv::Mat& image, Rng& rng, int64_t max_pixels,
                                                UserOpIo* io);
  // Whether the op declares its output's size (a plugin's fixed output;
  // `plugin`: the instance its check made, or null): the user ops before it
  // are then free to change the size (null: never).
  bool (*fixes_size)(const PluginInstance* plugin) = nullptr;
};

// What an op asks of its place in the pipeline and of the session, each
// rule with the reason its error gives (null: no such rule). Pipeline::Create
// checks them in the entry's words; CreatePrefix checks the place (the last
// op of the prefix) and whether the op may be in a prefix at all.
struct OpRules {
  enum Place { kAnywhere, kFirst, kLast };
  Place place = kAnywhere;
  const char* place_why = nullptr;    // "pipeline[i].NAME must be the first op: WHY"
  const char* boxes_why = nullptr;    // "pipeline[i].NAME WHY: the session needs a field of kind boxes"
  const char* float_why = nullptr;    // "pipeline[i].NAME needs dtype FLOAT16 or FLOAT32 (WHY)"
  const char* refused_why = nullptr;  // kRefused: "pipeline[i].NAME cannot move boxes, masks or keypoints (WHY): ..."
  const char* prefix_why = nullptr;   // never in a materialised prefix: "prefix[i] TEXT: WHY"
};

struct OpEntry {
  v1::Op::OpCase op;
  const char* torchvision;  // the counterpart, for documentation
  // The op's own rules, which its declared parameters (`params`) cannot say:
  // between fields (min <= max), counts, enums, defaults that depend on
  // another field. CheckOp runs it after filling the declared defaults and
  // before the declared ranges (null: none). INVALID_ARGUMENT names `where`
  // (e.g. "pipeline[2].gaussian_blur.kernel_size"). Updates `shape` when the
  // op changes the image's size.
  absl::Status (*check)(const std::string& where, v1::Op& op, OpShape* shape);
  // Whether the (checked) op draws random numbers.
  bool (*random)(const v1::Op& op);
  // Runs the (checked) op on an 8-bit RGB image, in place or by replacing
  // it; a kMoved op reports its steps to `geometry` (may be null).
  // Null for the media ops, which make their samples themselves
  // (pipeline_media.cc, audio_ops.h).
  void (*apply)(const v1::Op& op, cv::Mat& image, Rng& rng, const OpContext& context, GeometrySink* geometry);
  OpTargets targets = OpTargets::kUntouched;
  // Run before `apply` on the image it gets (null: none); resize's also runs
  // on the decoded size when the op is fused with decoding.
  absl::Status (*limit)(const v1::Op& op, cv::Size input, int64_t max_pixels) = LimitPaddedPixels;
  OpText text = {};
  // The op's fused form as a pipeline's first op (`plan` null: none), which
  // Pipeline::DecodeAndApply runs instead of `apply`: `plan` chooses, from
  // the encoded image's size (and `rng`, as `apply` would draw), the region
  // to decode (width 0: all of it) and the DCT scale in eighths (8: full
  // size), or answers false to leave this image to `apply`; `finish` (null:
  // nothing more) does the rest on the decoded pixels (a resize), with the
  // geometry steps after the crop. The decoder does the cropping and the coarse shrinking: the
  // pixels are those `apply` makes where no DCT shrinking is chosen, and close
  // to them where it is (pipeline_test.cc pins both).
  struct Fused {
    bool (*plan)(const v1::Op& op, int height, int width, Rng& rng, CropBox* region, int* scale) = nullptr;
    absl::Status (*finish)(const v1::Op& op, cv::Size original, int64_t max_pixels, cv::Mat& image,
                           GeometrySink* geometry) = nullptr;
    // Whether `plan` decodes a region (a crop) rather than only a smaller
    // scale: the diagnosis ladder's decoded-cache step cannot (ladder.h).
    bool region = false;
  };
  Fused fused = {};
  // The message's fields as data (OpParam; in the order their checks run).
  std::vector<OpParam> params = {};
  // Whether a materialised dataset may store the op's output: the ops of the
  // deterministic prefix a materialiser may split at (materialize/strategy.h),
  // with their estimate of the output's pixels for an input of `pixels`
  // (store_output.h; null: unchanged).
  bool storable = false;
  int64_t (*pixels)(const v1::Op& op, int64_t pixels) = nullptr;
  // Whether the op makes its output's size whatever its input's (a crop or a
  // letterbox to a given size): the user ops before it are then free to
  // change the size (Pipeline::NoteSize).
  bool sets_size = false;
  OpRules rules = {};
  // A declared op (dataplane/ops/declared/): `op` is kDeclared, `name` its
  // name in the text form and `params` its whole schema, the values a
  // v1::DeclaredOp carries in their order (DeclaredValue); `about` says what
  // it does, for the reference page. Null for the ops stoker.proto names.
  const char* name = nullptr;
  const char* about = nullptr;
  // A user op's hooks (user_op_entries.cc); null for every other op, whose
  // entry's own functions check and run it.
  const UserOpHooks* user = nullptr;
};

// A checked declared op's value of its `index`th parameter (CheckOp has
// filled every default).
inline double DeclaredValue(const v1::Op& op, int index) { return op.declared().values(index); }

// `entry` with its parameters declared (for the families' tables).
OpEntry WithParams(std::vector<OpParam> params, OpEntry entry);
// `entry` as setting the output's size (for the families' tables).
OpEntry SetsSize(OpEntry entry);
// `entry` as storable, with its pixel estimate (for the families' tables).
OpEntry Storable(int64_t (*pixels)(const v1::Op& op, int64_t pixels), OpEntry entry);
// `entry` with its rules (for the families' tables): only the first op
// (`why`), only the last, needing a field of kind boxes or a float dtype, or
// refusing targets (kRefused) for the reason `why`.
OpEntry OnlyFirst(const char* why, OpEntry entry);
OpEntry OnlyLast(OpEntry entry);
OpEntry NeedsBoxes(const char* why, OpEntry entry);
OpEntry NeedsFloat(const char* why, OpEntry entry);
OpEntry RefusesTargets(const char* why, OpEntry entry);
// The op's name in messages: a declared op's own, else its field's in v1::Op.
std::string OpName(const OpEntry& entry, const v1::Op& op);

// The parameters many ops declare alike: the gate's probability (unset: the
// op's own default) and each level of a fill.
inline constexpr OpParam kGateParam{"p", 0, 1};
inline constexpr OpParam kFillParam{"fill", 0, 255};

// The probability gate every registered op has ("p", unset: `otherwise`;
// its range 0..1 is declared with the op's parameters): PassesGate draws
// only when p < 1, so that a deterministic op never moves the random stream
// of the ops after it.
bool PassesGate(bool has_p, float p, float otherwise, Rng& rng);
// Whether an op message's own gate (an optional p, unset: 1) makes it random.
template <typename Message>
bool IsGated(const Message& m) {
  return m.has_p() && m.p() < 1;
}

// A warp's or pad's `fill` (repeated float: empty, one level, or R:G:B):
// INVALID_ARGUMENT naming `where` unless 0, 1 or 3 values (each value's
// range, 0..255, is declared with the op's parameters: {"fill", 0, 255}).
absl::Status CheckFill(const std::string& where, const google::protobuf::RepeatedField<float>& fill);
// The fill as a colour (empty: none, which callers read as 0 or as
// torchvision's fill=None).
std::optional<cv::Scalar> FillColour(const google::protobuf::RepeatedField<float>& fill);
// The warps take nearest or bilinear: INVALID_ARGUMENT for bicubic.
absl::Status CheckWarpInterpolation(const std::string& where, bool has, v1::Interpolation interpolation);

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_OP_ENTRY_H_
