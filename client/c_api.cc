// include/stoker/c_api.h over the training loader: options set by name from
// the one table (include/stoker/client_options.inc), a client that starts epochs as the
// Python Loader does, and batches handed out as plain C structs. Nothing
// thrown crosses the boundary: each call catches and answers INTERNAL.
#include "stoker/c_api.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/loader_options.h"
#include "client/training_loader.h"
#include "common/field_spec.h"
#include "nlohmann/json.hpp"

struct stoker_options {
  stoker::LoaderOptions o;
};

struct stoker_client {
  std::unique_ptr<stoker::TrainingLoader> loader;
  int32_t layout = STOKER_NCHW;
  int64_t epoch = 0;     // the epoch the next start runs (or the running one's)
  bool running = false;  // an epoch (or a restored one) was started and has not ended
};

struct stoker_batch {
  stoker::DeviceTensor tensor;
  int32_t layout = STOKER_NCHW;  // stoker_layout
};

namespace stoker {
namespace {

thread_local std::string last_error;

stoker_code Fail(const absl::Status& status) {
  last_error = std::string(status.message());
  return static_cast<stoker_code>(status.code());
}

stoker_code Answer(const absl::Status& status) {
  if (status.ok()) return STOKER_OK;
  return Fail(status);
}

// Runs `f` (returning a stoker_code), turning anything thrown into INTERNAL.
template <typename F>
stoker_code Guarded(const char* call, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Fail(absl::InternalError(absl::StrCat(call, ": ", e.what())));
  } catch (...) {
    return Fail(absl::InternalError(absl::StrCat(call, ": an unknown exception")));
  }
}

// Reading an option's text as its type (the types include/stoker/client_options.inc uses).
bool Read(absl::string_view text, int* v) { return absl::SimpleAtoi(text, v); }
bool Read(absl::string_view text, int64_t* v) { return absl::SimpleAtoi(text, v); }
bool Read(absl::string_view text, uint64_t* v) { return absl::SimpleAtoi(text, v); }
bool Read(absl::string_view text, double* v) { return absl::SimpleAtod(text, v); }
bool Read(absl::string_view text, float* v) { return absl::SimpleAtof(text, v); }
bool Read(absl::string_view text, bool* v) {
  if (text == "true" || text == "1") return *v = true, true;
  if (text == "false" || text == "0") return *v = false, true;
  return false;
}
bool Read(absl::string_view text, std::string* v) { return *v = std::string(text), true; }
template <typename T>
bool Read(absl::string_view text, std::vector<T>* v) {
  std::vector<T> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    T item{};
    if (!Read(absl::StripAsciiWhitespace(part), &item)) return false;
    out.push_back(std::move(item));
  }
  *v = std::move(out);
  return true;
}

absl::Status SetOption(LoaderOptions& o, absl::string_view name, absl::string_view value) {
  if (name == "device" && absl::ConsumePrefix(&value, "cuda:")) {  // the device's number, as Python's "cuda:N"
    int gpu = -1;
    if (!absl::SimpleAtoi(value, &gpu) || gpu < 0) {
      return absl::InvalidArgumentError(absl::StrCat("device 'cuda:", value, "'; expected cpu, cuda or cuda:N"));
    }
    o.device = "cuda";
    o.gpu = gpu;
    return absl::OkStatus();
  }
  bool known = false, read = false;
  const char* type = "";
  ForEachOptionMember([&](const OptionInfo& info, auto member) {
    if (info.name != name) return;
    known = true;
    type = info.type;
    auto parsed = o.*member;  // the option keeps its value when the text does not read
    read = Read(value, &parsed);
    if (read) o.*member = std::move(parsed);
  });
  if (!known) {
    return absl::InvalidArgumentError(
        absl::StrCat("no option '", name, "' (stoker_option_name lists them; docs/reference/python.md's table)"));
  }
  if (!read) return absl::InvalidArgumentError(absl::StrCat("option ", name, ": '", value, "' is not a ", type));
  return absl::OkStatus();
}

int32_t LayoutOf(const LoaderConfig& config) {
  const v1::SessionConfig& s = config.client.session;
  if (!s.pipeline().empty() && (s.pipeline(0).has_audio() || s.pipeline(0).has_video_clip())) {
    return STOKER_LAYOUT_OTHER;
  }
  return config.device.layout == TensorLayout::kNCHW ? STOKER_NCHW : STOKER_NHWC;
}

char* Copy(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

}  // namespace
}  // namespace stoker

using stoker::Answer;
using stoker::Fail;
using stoker::Guarded;

extern "C" {

int stoker_abi_version(void) { return STOKER_ABI_VERSION; }
const char* stoker_version(void) { return STOKER_VERSION_TEXT; }
const char* stoker_last_error(void) { return stoker::last_error.c_str(); }
void stoker_free(void* p) { std::free(p); }

stoker_options* stoker_options_new(void) {
  try {
    return new stoker_options();
  } catch (...) {
    return nullptr;
  }
}
void stoker_options_free(stoker_options* options) { delete options; }

stoker_code stoker_options_set(stoker_options* options, const char* name, const char* value) {
  return Guarded("stoker_options_set", [&] {
    if (options == nullptr || name == nullptr || value == nullptr) {
      return Fail(absl::InvalidArgumentError("stoker_options_set: null options, name or value"));
    }
    return Answer(stoker::SetOption(options->o, name, value));
  });
}

int stoker_option_count(void) { return static_cast<int>(stoker::LoaderOptionTable().size()); }
static const stoker::OptionInfo* OptionAt(int i) {
  const auto table = stoker::LoaderOptionTable();
  return i >= 0 && i < static_cast<int>(table.size()) ? &table[static_cast<size_t>(i)] : nullptr;
}
const char* stoker_option_name(int i) { return OptionAt(i) ? OptionAt(i)->name : nullptr; }
const char* stoker_option_type(int i) { return OptionAt(i) ? OptionAt(i)->type : nullptr; }
const char* stoker_option_unit(int i) { return OptionAt(i) ? OptionAt(i)->unit : nullptr; }
const char* stoker_option_help(int i) { return OptionAt(i) ? OptionAt(i)->help : nullptr; }

stoker_code stoker_client_open(const stoker_options* options, stoker_client** out) {
  return Guarded("stoker_client_open", [&] {
    if (options == nullptr || out == nullptr) return Fail(absl::InvalidArgumentError("stoker_client_open: null"));
    *out = nullptr;
    absl::StatusOr<stoker::LoaderConfig> config = stoker::ToConfig(options->o);
    if (!config.ok()) return Fail(config.status());
    auto client = std::make_unique<stoker_client>();
    client->layout = stoker::LayoutOf(*config);
    absl::StatusOr<std::unique_ptr<stoker::TrainingLoader>> loader = stoker::TrainingLoader::Create(*std::move(config));
    if (!loader.ok()) return Fail(loader.status());
    client->loader = *std::move(loader);
    *out = client.release();
    return STOKER_OK;
  });
}

void stoker_client_close(stoker_client* client) {
  try {
    delete client;
  } catch (...) {
  }
}

int64_t stoker_client_num_samples(const stoker_client* client) {
  return client ? client->loader->dataset().num_samples() : -1;
}
int64_t stoker_client_batches_per_epoch(const stoker_client* client) {
  return client ? client->loader->BatchesPerEpoch() : -1;
}

int64_t stoker_client_epoch(const stoker_client* client) { return client ? client->epoch : -1; }

stoker_code stoker_client_set_epoch(stoker_client* client, int64_t epoch) {
  return Guarded("stoker_client_set_epoch", [&] {
    if (client == nullptr) return Fail(absl::InvalidArgumentError("stoker_client_set_epoch: null client"));
    if (epoch < 0) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("stoker_client_set_epoch: epoch ", epoch, " (need >= 0)")));
    }
    if (client->running && epoch == client->epoch) return STOKER_OK;  // the running (or restored) epoch continues
    client->epoch = epoch;
    client->running = false;  // the next call to next starts it
    return STOKER_OK;
  });
}

stoker_code stoker_client_next(stoker_client* client, void* cuda_stream, stoker_batch** out) {
  return Guarded("stoker_client_next", [&] {
    if (client == nullptr || out == nullptr) return Fail(absl::InvalidArgumentError("stoker_client_next: null"));
    *out = nullptr;
    if (!client->running) {
      if (absl::Status s = client->loader->StartEpoch(client->epoch); !s.ok()) return Fail(s);
      client->running = true;
    }
    auto batch = std::make_unique<stoker_batch>();
    absl::StatusOr<bool> got = client->loader->Next(cuda_stream, /*wait=*/false, &batch->tensor);
    if (!got.ok()) return Fail(got.status());
    if (!*got) {  // the epoch ended: the next call starts the one after it
      client->running = false;
      client->epoch = client->loader->Position().epoch() + 1;
      return STOKER_OK;
    }
    batch->layout = client->layout;
    *out = batch.release();
    return STOKER_OK;
  });
}

stoker_code stoker_client_state(const stoker_client* client, void** data, size_t* size) {
  return Guarded("stoker_client_state", [&] {
    if (client == nullptr || data == nullptr || size == nullptr) {
      return Fail(absl::InvalidArgumentError("stoker_client_state: null"));
    }
    stoker::v1::ClientPosition p = client->loader->Position();
    if (!client->running) {  // between epochs: the selected epoch, from its start
      p.set_epoch(client->epoch);
      p.set_next_batch(0);
      p.clear_delivered_beyond();
    }
    const std::string bytes = p.SerializeAsString();
    *data = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (*data == nullptr) return Fail(absl::ResourceExhaustedError("stoker_client_state: out of memory"));
    std::memcpy(*data, bytes.data(), bytes.size());
    *size = bytes.size();
    return STOKER_OK;
  });
}

stoker_code stoker_client_restore(stoker_client* client, const void* data, size_t size) {
  return Guarded("stoker_client_restore", [&] {
    if (client == nullptr || (data == nullptr && size > 0)) {
      return Fail(absl::InvalidArgumentError("stoker_client_restore: null"));
    }
    if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("stoker_client_restore: ", size, " bytes is not a state")));
    }
    stoker::v1::ClientPosition p;
    if (!p.ParseFromArray(data, static_cast<int>(size))) {
      return Fail(
          absl::InvalidArgumentError("stoker_client_restore: the bytes are not a state stoker_client_state made"));
    }
    if (absl::Status s = client->loader->Resume(p); !s.ok()) return Fail(s);
    client->epoch = p.epoch();
    client->running = true;
    return STOKER_OK;
  });
}

stoker_code stoker_client_stats_json(const stoker_client* client, char** json) {
  return Guarded("stoker_client_stats_json", [&] {
    if (client == nullptr || json == nullptr) return Fail(absl::InvalidArgumentError("stoker_client_stats_json: null"));
    *json = stoker::Copy(stoker::LoaderStatsJson(client->loader->Stats()).dump());
    return *json != nullptr ? STOKER_OK : Fail(absl::ResourceExhaustedError("stoker_client_stats_json: out of memory"));
  });
}

int64_t stoker_batch_size(const stoker_batch* batch) {
  return batch ? static_cast<int64_t>(batch->tensor.batch.sample_indices.size()) : 0;
}
int64_t stoker_batch_epoch(const stoker_batch* batch) { return batch ? batch->tensor.batch.epoch : -1; }
int64_t stoker_batch_index(const stoker_batch* batch) { return batch ? batch->tensor.batch.batch_index : -1; }

static stoker_code Describe(const char* call, void* data, int32_t dtype, int32_t layout,
                            const std::vector<int64_t>& shape, const stoker::DeviceTensor& t, stoker_tensor* out) {
  if (shape.size() > STOKER_MAX_DIMS) {
    return Fail(absl::InternalError(absl::StrCat(call, ": ", shape.size(), " dimensions")));
  }
  *out = stoker_tensor{};
  out->data = data;
  out->dtype = dtype;
  out->layout = layout;
  out->ndim = static_cast<int32_t>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) out->shape[i] = shape[i];
  out->device = t.device;
  out->cuda_event = t.ready_event;
  return STOKER_OK;
}

stoker_code stoker_batch_image(const stoker_batch* batch, stoker_tensor* out) {
  return Guarded("stoker_batch_image", [&] {
    if (batch == nullptr || out == nullptr) return Fail(absl::InvalidArgumentError("stoker_batch_image: null"));
    const stoker::DeviceTensor& t = batch->tensor;
    return Describe("stoker_batch_image", t.data, static_cast<int32_t>(t.type), batch->layout, t.shape, t, out);
  });
}

stoker_code stoker_batch_targets(const stoker_batch* batch, stoker_tensor* out) {
  return Guarded("stoker_batch_targets", [&] {
    if (batch == nullptr || out == nullptr) return Fail(absl::InvalidArgumentError("stoker_batch_targets: null"));
    const stoker::DeviceTensor& t = batch->tensor;
    if (t.targets == nullptr) {
      return Fail(absl::NotFoundError("stoker_batch_targets: no MixUp or CutMix (options mixup_alpha, cutmix_alpha)"));
    }
    return Describe("stoker_batch_targets", t.targets, STOKER_FLOAT32, STOKER_LAYOUT_OTHER, t.targets_shape, t, out);
  });
}

const int32_t* stoker_batch_labels(const stoker_batch* batch) {
  return batch ? batch->tensor.batch.labels.data() : nullptr;
}
const int64_t* stoker_batch_sample_indices(const stoker_batch* batch) {
  return batch ? batch->tensor.batch.sample_indices.data() : nullptr;
}
int stoker_batch_field_count(const stoker_batch* batch) {
  return batch ? static_cast<int>(batch->tensor.batch.fields.size()) : 0;
}

static stoker_code BatchField(const stoker_batch* batch, int i, stoker_field* out) {
  if (batch == nullptr || out == nullptr || i < 0 || i >= stoker_batch_field_count(batch)) {
    return Fail(
        absl::OutOfRangeError(absl::StrCat("stoker_batch_field: field ", i, " of ", stoker_batch_field_count(batch))));
  }
  const stoker::Batch& b = batch->tensor.batch;
  const stoker::v1::FieldData& f = b.fields[static_cast<size_t>(i)];
  *out = stoker_field{};
  out->name = f.name().c_str();
  out->kind = stoker::FieldKindName(f.kind());
  out->values = b.field_data.data() + f.offset();
  out->bytes = static_cast<size_t>(f.bytes());
  out->offsets = f.sample_offsets().data();
  out->num_offsets = f.sample_offsets_size();
  out->item_ndim = f.item_shape_size();
  out->item_shape = f.item_shape().data();
  return STOKER_OK;
}

stoker_code stoker_batch_field(const stoker_batch* batch, int i, stoker_field* out) {
  return Guarded("stoker_batch_field", [&] { return BatchField(batch, i, out); });
}

void stoker_batch_release(stoker_batch* batch, void* cuda_stream) {
  if (batch == nullptr) return;
  try {
    batch->tensor.Release(cuda_stream);
    delete batch;
  } catch (...) {
  }
}

}  // extern "C"
