#include "dataplane/ops/op_registry.h"

#include <map>

namespace stoker {

const OpEntry* FindOp(v1::Op::OpCase op) {
  static const auto* table = [] {
    auto* t = new std::map<v1::Op::OpCase, OpEntry>();
    for (const auto* family :
         {&CoreOps(), &MediaOps(), &PhotometricOps(), &ErasingOps(), &GeometricOps(), &PolicyOps()}) {
      for (const OpEntry& e : *family) t->emplace(e.op, e);
    }
    return t;
  }();
  auto it = table->find(op);
  return it == table->end() ? nullptr : &it->second;
}

bool StartsWithCrop(const std::vector<v1::Op>& pipeline) {
  const OpEntry* first = pipeline.empty() ? nullptr : FindOp(pipeline[0].op_case());
  return first != nullptr && first->fused.region;
}

}  // namespace stoker
