// For the ops' tests: a pipeline made from its text form, as a session of
// one-sample batches with no fields would have it.
#ifndef STOKER_DATAPLANE_OPS_PIPELINE_TEST_UTIL_H_
#define STOKER_DATAPLANE_OPS_PIPELINE_TEST_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"

namespace stoker {

inline absl::StatusOr<Pipeline> PipelineFromText(const std::string& text) {
  v1::SessionConfig c;
  c.set_batch_size(1);
  const absl::StatusOr<std::vector<v1::Op>> ops = ParsePipelineText(text);
  if (!ops.ok()) return ops.status();
  for (const v1::Op& op : *ops) *c.add_pipeline() = op;
  return Pipeline::Create(c);
}

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_PIPELINE_TEST_UTIL_H_
