// For the ops' tests: a pipeline made from its text form, as a session of
// one-sample batches with no fields would have it, and what it does to boxes.
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

// The boxes {1, 2, 9, 10} of one sample after `pipeline` (ops that keep
// the size) runs on `image`: what a photometric op's target rule must leave.
inline absl::StatusOr<std::vector<float>> BoxesAfter(const std::string& pipeline, const cv::Mat& image) {
  absl::StatusOr<Pipeline> p = PipelineFromText(pipeline);
  if (!p.ok()) return p.status();
  SampleTargets targets;
  targets.boxes = {1, 2, 9, 10};
  targets.labels = {3};
  targets.crowd = {0};
  GeometrySink sink;
  sink.targets = &targets;
  if (absl::Status s = sink.Start(image.cols, image.rows); !s.ok()) return s;
  Rng rng(1);
  if (absl::Status s = p->Apply(image, rng, 0, 0, &sink).status(); !s.ok()) return s;
  return targets.boxes;
}

}  // namespace stoker

#endif  // STOKER_DATAPLANE_OPS_PIPELINE_TEST_UTIL_H_
