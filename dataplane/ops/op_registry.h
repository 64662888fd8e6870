// Every op a pipeline names: one entry per op says how the
// text form reads and prints it (pipeline_text.h), how Pipeline::Create
// checks it and fills its defaults, whether it draws random numbers (the
// materialiser stores only ops that do not), how Pipeline::Apply runs it, and
// what the generated reference (docs/reference/pipeline.md) says of it. Each
// family of ops registers its entries, one file per family with its tests:
// core_ops.cc (crops, resizes, flips, color_jitter, normalize, the detection
// crop), photometric_ops.h, erasing_ops.h, geometric_ops.h, policy_ops.h and
// media_ops.cc (video_clip, audio, mel_spectrogram), user_op_entries.cc
// (python(...) and plugin ops, which the server's Python stage or plugin
// checks and runs through the entry's UserOpHooks); a declared op is one
// file in declared/ with one line in declared/ops.inc, its declaration its
// whole schema (v1::DeclaredOp carries its values). The table is immutable;
// thread-safe. What an entry holds is op_entry.h; the registry gathers the
// families' tables (it includes none of them, and nothing of the text form:
// a user op's entry holds its hooks into it),
// finds an op's entry and checks an op by it (CheckOp: its declared
// parameters and its own rules), so that a session's op is found and checked
// in this one file.
#ifndef STOKER_DATAPLANE_OPS_OP_REGISTRY_H_
#define STOKER_DATAPLANE_OPS_OP_REGISTRY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "dataplane/ops/op_entry.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

// The entry for `op`, or null for OP_NOT_SET (and kDeclared: a declared op
// is found by its name). python(...) and plugin ops have entries whose
// UserOpHooks (`user`) hold their checks and runs.
const OpEntry* FindOp(v1::Op::OpCase op);
// The entry for the op `op` is: by its case, or a declared op's by its name
// (null: none set, or a declared op this build does not have).
const OpEntry* FindOp(const v1::Op& op);

// Whether `op` is a user op (python(...), a plugin op): its entry has UserOpHooks.
bool IsUserOp(const v1::Op& op);

// The declared ops (dataplane/ops/declared/: each one file, registered by a
// line of declared/ops.inc), in that file's order; and one by its name.
const std::vector<OpEntry>& DeclaredOps();
const OpEntry* FindDeclaredOp(absl::string_view name);

// The entry's whole check of `op`, as Pipeline::Create runs it: the declared
// defaults filled in, then the entry's own `check` (its rules between fields;
// null: none), then the declared ranges. INVALID_ARGUMENT names `where`.
absl::Status CheckOp(const OpEntry& entry, const std::string& where, v1::Op& op, OpShape* shape);

// Whether the op's output is float pixels: its entry needs a float dtype
// (OpRules::float_why: normalize). A stored prefix that ends in it stores
// float32 pixels; a session that ends in it needs FLOAT16 or FLOAT32.
bool MakesFloats(const v1::Op& op);

// "lo..hi unit" ("(lo, hi] unit" above lo) of a declared parameter, as the messages and the reference
// page write it.
std::string ParamRange(const OpParam& param);
// Whether `value` has the parameter's type: a kInteger parameter's is whole
// (the text form and CheckOp refuse it otherwise, "is not an integer").
bool HasParamType(const OpParam& param, double value);

// Checks `body`, the message of an op `which` (e.g. a v1::Audio for
// kAudio), as its entry does (CheckOp), in place: for the callers that hold
// the message alone.
absl::Status CheckOpBody(v1::Op::OpCase which, const std::string& where, google::protobuf::Message& body);

// Whether the pipeline starts with a crop: an op whose fused form decodes
// only a region (OpEntry::Fused::region: random_resized_crop, center_crop),
// which the diagnosis ladder's decoded-cache step cannot (ladder.h).
bool StartsWithCrop(const std::vector<v1::Op>& pipeline);

// The families' tables (defined in their files).
const std::vector<OpEntry>& CoreOps();
const std::vector<OpEntry>& MediaOps();
const std::vector<OpEntry>& PhotometricOps();
const std::vector<OpEntry>& ErasingOps();
const std::vector<OpEntry>& GeometricOps();
const std::vector<OpEntry>& PolicyOps();
const std::vector<OpEntry>& UserOpEntries();  // python(...) and plugin ops: user_op_entries.cc

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_OP_REGISTRY_H_
