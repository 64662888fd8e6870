// The pipeline text parser: any text either parses into ops that validate
// or not, and what parses prints back to text that parses to the same ops.
#include <cstdint>
#include <string>

#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto ops = stoker::ParsePipelineText(text);
  if (!ops.ok()) return 0;
  stoker::v1::SessionConfig config;
  config.set_dataset("fuzz");
  config.set_batch_size(1);
  for (const auto& op : *ops) *config.add_pipeline() = op;
  (void)stoker::Pipeline::Create(config);
  auto again = stoker::ParsePipelineText(stoker::PipelineToText(*ops));
  if (!again.ok() || again->size() != ops->size()) __builtin_trap();
  return 0;
}
