#include "client/batch.h"

#include "common/field_layout.h"

namespace stoker {

void FillBatchFromHeader(const v1::BatchHeader& h, const std::string& producer, Batch* b) {
  b->epoch = h.epoch();
  b->batch_index = h.batch_index();
  b->sample_indices.assign(h.sample_indices().begin(), h.sample_indices().end());
  b->labels.assign(h.labels().begin(), h.labels().end());
  b->shape.assign(h.shape().begin(), h.shape().end());
  b->layout = h.layout();
  b->dtype = h.dtype() == v1::DTYPE_UNSPECIFIED ? v1::UINT8 : h.dtype();
  b->stage_times = h.stage_times();
  b->failed_samples.assign(h.failed_samples().begin(), h.failed_samples().end());
  b->sample_sizes.assign(h.sample_sizes().begin(), h.sample_sizes().end());
  b->server = producer;
  b->fields.assign(h.fields().begin(), h.fields().end());
}

const v1::FieldData* Batch::Field(absl::string_view name) const {
  for (const v1::FieldData& f : fields) {
    if (f.name() == name) return &f;
  }
  return nullptr;
}

absl::string_view Batch::FieldValue(const v1::FieldData& field, int64_t i) const {
  return stoker::FieldValue(field, field_data, i);
}

}  // namespace stoker
