#include "dataplane/op_registry.h"

#include <map>

#include "absl/strings/str_format.h"

namespace stoker {

const OpEntry* FindOp(v1::Op::OpCase op) {
  static const auto* table = [] {
    auto* t = new std::map<v1::Op::OpCase, OpEntry>();
    for (const auto* family : {&PhotometricOps(), &ErasingOps(), &GeometricOps(), &PolicyOps()}) {
      for (const OpEntry& e : *family) t->emplace(e.op, e);
    }
    return t;
  }();
  auto it = table->find(op);
  return it == table->end() ? nullptr : &it->second;
}

absl::Status CheckProbability(const std::string& where, bool has_p, float p) {
  if (has_p && !(p >= 0 && p <= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.p = %g; allowed range is 0..1", where, p));
  }
  return absl::OkStatus();
}

bool PassesGate(bool has_p, float p, float otherwise, Rng& rng) {
  const float q = has_p ? p : otherwise;
  if (q >= 1) return true;
  return rng.UniformDouble() < q;
}

}  // namespace stoker
