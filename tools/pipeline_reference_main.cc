// stoker-pipeline-reference: prints every pipeline op the text form reads
// (PipelineGrammar), with its torchvision counterpart and what it does to
// targets (the op registry), as JSON lines for
// docs/gen_reference.py, which adds stoker.proto's comments and writes
// docs/reference/pipeline.md.
// Each op's declared parameters (OpParam: field, range, default, unit) come
// with it: the page prints them, and gen_reference.py refuses a range that
// stoker.proto's comments state otherwise.
#include <cmath>
#include <iostream>
#include <string>

#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"
#include "nlohmann/json.hpp"

int main() {
  const google::protobuf::Descriptor* op = stoker::v1::Op::descriptor();
  for (const stoker::OpGrammar& g : stoker::PipelineGrammar()) {
    const google::protobuf::FieldDescriptor* field = op->FindFieldByName(g.name);
    nlohmann::json line = {{"name", g.name}, {"message", g.message}};
    for (const auto& a : g.arguments) {
      line["arguments"].push_back({{"name", a.name}, {"kind", a.kind}, {"fields", a.fields}});
    }
    if (line["arguments"].is_null()) line["arguments"] = nlohmann::json::array();
    const stoker::OpEntry* entry = field != nullptr
                                       ? stoker::FindOp(static_cast<stoker::v1::Op::OpCase>(field->number()))
                                       : stoker::FindDeclaredOp(g.name);  // a declared op: its entry says it all
    if (entry == nullptr) {
      std::cerr << "stoker-pipeline-reference: op " << g.name << " has no entry in the op registry\n";
      return 1;
    }
    line["counterpart"] = entry->torchvision;
    if (entry->about != nullptr) line["about"] = entry->about;
    line["params"] = nlohmann::json::array();
    for (const stoker::OpParam& p : entry->params) {
      // "range" as the server's messages write it (ParamRange), for the page.
      nlohmann::json param = {{"field", p.field}, {"lo", p.lo}, {"hi", p.hi}, {"range", stoker::ParamRange(p)}};
      if (!std::isnan(p.fallback)) param["default"] = p.fallback;
      if (*p.help != '\0') param["help"] = p.help;
      line["params"].push_back(param);
    }
    switch (entry->targets) {
      case stoker::OpTargets::kUntouched: line["targets"] = "untouched"; break;
      case stoker::OpTargets::kMoved: line["targets"] = "moved with the pixels"; break;
      case stoker::OpTargets::kRefused: line["targets"] = "refused"; break;
      case stoker::OpTargets::kNone: line["targets"] = ""; break;
    }
    std::cout << line.dump() << "\n";
  }
  return 0;
}
