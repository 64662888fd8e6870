// stoker-pipeline-reference: prints every pipeline op the text form reads
// (PipelineGrammar), with its torchvision counterpart and what it does to
// targets (the op registry), as JSON lines for
// docs/gen_reference.py, which adds stoker.proto's comments and writes
// docs/reference/pipeline.md.
//
// With --check, reads one op's text per line from stdin and prints, per
// line, "ok" when the op's entry in the op registry accepts it, or
// "refused: WHY" / "unparsed: WHY": docs/check_ranges.py probes the ranges
// the reference states against the checks this way.
#include <cstring>
#include <iostream>
#include <string>

#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"
#include "nlohmann/json.hpp"

namespace {

int CheckLines() {
  std::string text;
  while (std::getline(std::cin, text)) {
    absl::StatusOr<std::vector<stoker::v1::Op>> ops = stoker::ParsePipelineText(text);
    if (!ops.ok() || ops->size() != 1) {
      std::cout << "unparsed: " << (ops.ok() ? "not one op" : std::string(ops.status().message())) << "\n";
      continue;
    }
    stoker::v1::Op& op = ops->front();
    const stoker::OpEntry* entry = stoker::FindOp(op.op_case());
    if (entry == nullptr) {
      std::cout << "unparsed: not a registered op\n";
      continue;
    }
    stoker::OpShape shape;
    const absl::Status s = entry->check("op", op, &shape);
    std::cout << (s.ok() ? "ok" : "refused: " + std::string(s.message())) << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--check") == 0) return CheckLines();
  const google::protobuf::Descriptor* op = stoker::v1::Op::descriptor();
  for (const stoker::OpGrammar& g : stoker::PipelineGrammar()) {
    const auto which = static_cast<stoker::v1::Op::OpCase>(op->FindFieldByName(g.name)->number());
    nlohmann::json line = {{"name", g.name}, {"message", g.message}};
    for (const auto& a : g.arguments) {
      line["arguments"].push_back({{"name", a.name}, {"kind", a.kind}, {"fields", a.fields}});
    }
    if (line["arguments"].is_null()) line["arguments"] = nlohmann::json::array();
    const stoker::OpEntry* entry = stoker::FindOp(which);
    if (entry == nullptr) {
      std::cerr << "stoker-pipeline-reference: op " << g.name << " has no entry in the op registry\n";
      return 1;
    }
    line["counterpart"] = entry->torchvision;
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
