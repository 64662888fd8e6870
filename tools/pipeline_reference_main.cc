// stoker-pipeline-reference: prints every pipeline op the text form reads
// (PipelineGrammar), with its torchvision counterpart and what it does to
// targets (the op registry, or the built-in checks), as JSON lines for
// docs/gen_reference.py, which adds stoker.proto's comments and writes
// docs/reference/pipeline.md.
#include <iostream>

#include "common/pipeline_text.h"
#include "dataplane/op_registry.h"
#include "dataplane/pipeline_checks.h"
#include "nlohmann/json.hpp"

int main() {
  const google::protobuf::Descriptor* op = stoker::v1::Op::descriptor();
  for (const stoker::OpGrammar& g : stoker::PipelineGrammar()) {
    const auto which = static_cast<stoker::v1::Op::OpCase>(op->FindFieldByName(g.name)->number());
    nlohmann::json line = {{"name", g.name}, {"message", g.message}};
    for (const auto& a : g.arguments) {
      line["arguments"].push_back({{"name", a.name}, {"kind", a.kind}, {"fields", a.fields}});
    }
    if (line["arguments"].is_null()) line["arguments"] = nlohmann::json::array();
    const stoker::OpEntry* entry = stoker::FindOp(which);
    const stoker::BuiltInOpInfo built_in = stoker::BuiltInOp(which);
    line["counterpart"] = entry != nullptr ? entry->torchvision : built_in.counterpart != nullptr ? built_in.counterpart : "";
    line["registered"] = entry != nullptr;
    if (entry != nullptr) {
      line["targets"] = entry->targets == stoker::OpTargets::kUntouched ? "untouched"
                        : entry->targets == stoker::OpTargets::kMoved   ? "moved with the pixels"
                                                                        : "refused";
    } else {
      line["targets"] = built_in.targets != nullptr ? built_in.targets : "";
    }
    std::cout << line.dump() << "\n";
  }
  return 0;
}
