#include "client/loader_options.h"

#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/stoker_client.h"
#include "common/field_spec.h"
#include "dataplane/ops/pipeline_text.h"

namespace stoker {
namespace {

template <typename T>
std::string ValueText(const T& v) {
  std::ostringstream out;
  out << v;
  return out.str();
}
std::string ValueText(bool v) { return v ? "true" : "false"; }
std::string ValueText(const std::string& v) { return absl::StrCat("\"", absl::CEscape(v), "\""); }
template <typename T>
std::string ValueText(const std::vector<T>& v) {
  std::vector<std::string> parts;
  for (const T& e : v) parts.push_back(ValueText(e));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

}  // namespace

absl::Span<const OptionInfo> LoaderOptionTable() {
  static constexpr OptionInfo kTable[] = {
#define STOKER_OPTION(type, name, default_value, unit, python, help) {#type, #name, unit, python, help},
#include "stoker/client_options.inc"
#undef STOKER_OPTION
  };
  return kTable;
}

std::string OptionValueText(const LoaderOptions& o, std::string_view name) {
  std::string text;
  ForEachOptionMember([&](const OptionInfo& info, auto member) {
    if (info.name == name) text = ValueText(o.*member);
  });
  return text;
}

absl::Status SessionFromOptions(const LoaderOptions& o, v1::SessionConfig* s) {
  if (o.dataset.empty()) return absl::InvalidArgumentError("dataset: a name under the servers' --data-root");
  s->set_dataset(o.dataset);
  // The pipeline text is parsed once: its first op tells how the fields read.
  auto ops = ParsePipelineText(o.pipeline.empty() ? std::string(kDefaultTrainPipeline) : o.pipeline);
  if (!ops.ok()) return ops.status();
  absl::StatusOr<std::vector<v1::FieldSpec>> fields = ParseFieldsText(o.fields, !ops->empty() && (*ops)[0].has_audio());
  if (!fields.ok()) return fields.status();
  for (v1::FieldSpec& f : *fields) *s->add_fields() = std::move(f);
  s->set_max_field_bytes(o.max_field_bytes);
  s->set_annotations(o.annotations);
  s->set_box_min_visibility(static_cast<float>(o.box_min_visibility));
  s->set_tokenizer(o.tokenizer);
  s->set_max_tokens(o.max_tokens);
  s->set_batch_size(o.batch_size);
  s->set_seed(o.seed);
  for (v1::Op& op : *ops) *s->add_pipeline() = std::move(op);
  // Servers send uint8 NHWC; the type and layout asked for are made here.
  s->set_dtype(v1::UINT8);
  s->set_layout(v1::NHWC);
  if (o.bad_sample_policy != "skip" && o.bad_sample_policy != "fail") {
    return absl::InvalidArgumentError(
        absl::StrCat("bad_sample_policy '", o.bad_sample_policy, "'; expected skip or fail"));
  }
  s->set_bad_sample_policy(o.bad_sample_policy == "fail" ? v1::FAIL : v1::SKIP);
  const std::pair<const char*, v1::CacheMode> modes[] = {
      {"none", v1::CACHE_NONE}, {"batch", v1::CACHE_BATCH}, {"decoded", v1::CACHE_DECODED}, {"raw", v1::CACHE_RAW}};
  bool known = false;
  for (const auto& [name, mode] : modes) {
    if (o.cache_mode == name) {
      s->set_cache_mode(mode);
      known = true;
    }
  }
  if (!known)
    return absl::InvalidArgumentError(
        absl::StrCat("cache_mode '", o.cache_mode, "'; expected none, batch, decoded or raw"));
  absl::StatusOr<v1::ShuffleOrder> shuffle = ParseShuffleOrder(o.shuffle);
  if (!shuffle.ok()) return shuffle.status();
  s->set_shuffle(*shuffle);
  if (o.shard_window < 0) {
    return absl::InvalidArgumentError(absl::StrCat("shard_window ", o.shard_window, "; expected 0 (4) or more"));
  }
  s->set_shard_window(o.shard_window);
  return absl::OkStatus();
}

absl::Status DeviceFromOptions(const LoaderOptions& o, DeviceOptions* d) {
  absl::StatusOr<DeviceOptions::Device> device = ParseDevice(o.device);
  if (!device.ok()) return device.status();
  d->device = *device;
  d->gpu = o.gpu;
  if (!ParseTensorType(o.dtype.c_str(), &d->type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype '", o.dtype, "'; expected float32, float16, bfloat16 or uint8"));
  }
  if (o.layout != "nchw" && o.layout != "nhwc") {
    return absl::InvalidArgumentError(absl::StrCat("layout '", o.layout, "'; expected nchw or nhwc"));
  }
  d->layout = o.layout == "nchw" ? TensorLayout::kNCHW : TensorLayout::kNHWC;
  d->normalize = o.normalize;
  if (o.mean.size() != 3 || o.std.size() != 3) return absl::InvalidArgumentError("mean and std need 3 values (RGB)");
  for (int i = 0; i < 3; ++i) {
    if (!(o.std[i] > 0)) return absl::InvalidArgumentError(absl::StrCat("std[", i, "] = ", o.std[i], "; must be > 0"));
    d->mean[i] = o.mean[i];
    d->std[i] = o.std[i];
  }
  d->slots = o.slots;
  d->max_slots = o.max_slots;
  d->slot_wait = absl::Seconds(o.slot_wait_s);
  d->host_slots = 0;  // sized from the prefetch depth
  d->test_h2d_delay = absl::Milliseconds(o.test_h2d_delay_ms);
  return absl::OkStatus();
}

absl::StatusOr<LoaderConfig> ToConfig(const LoaderOptions& o) {
  LoaderConfig c;
  ClientConfig& cc = c.client;
  cc.servers = o.servers;
  if (o.local_workers < 0)
    return absl::InvalidArgumentError(absl::StrCat("local_workers = ", o.local_workers, "; must be >= 0"));
  cc.local.workers = o.local_workers;
  cc.session.set_job(o.job);
  cc.session.set_weight(o.weight);
  cc.local.data_root = o.data_root;
  cc.local.python.modules = o.python_transforms;
  cc.local.python.processes = o.python_workers;
  if (!o.python_executable.empty()) cc.local.python.executable = o.python_executable;
  cc.local.python.timeout = absl::Seconds(o.python_transform_timeout);
  cc.local.op_plugins = o.op_plugins;
  cc.security = {o.tls_ca, o.tls_cert, o.tls_key, o.tls_server_name, o.auth_token_file};
  if (cc.servers.empty() && cc.local.workers == 0) {
    return absl::InvalidArgumentError(
        "no producers: give servers (host:port,... or dns:///name:port), local_workers >= 1 with data_root, or both");
  }
  if (absl::Status s = SessionFromOptions(o, &cc.session); !s.ok()) return s;
  cc.drop_last = o.drop_last;
  cc.rank = o.rank;
  cc.world_size = o.world_size;
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", o.rank, " of world size ", o.world_size, "; expected 0 <= rank < world_size"));
  }
  cc.ordered = o.ordered;
  cc.window_per_server = o.window;
  if (o.streams_per_server < 1) {
    return absl::InvalidArgumentError(absl::StrCat("streams_per_server ", o.streams_per_server, "; expected >= 1"));
  }
  cc.streams_per_server = o.streams_per_server;
  cc.prefetch_batches = o.prefetch;
  if (o.prefetch_bytes < 0 || o.max_servers < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch_bytes ", o.prefetch_bytes, ", max_servers ", o.max_servers, "; expected >= 0"));
  }
  cc.prefetch_bytes = o.prefetch_bytes;
  cc.max_servers = o.max_servers;
  cc.epochs = o.epochs;
  cc.rpc_timeout = absl::Seconds(o.connect_timeout_s);
  cc.open_timeout = absl::Seconds(o.open_timeout_s);
  cc.batch_timeout = absl::Seconds(o.batch_timeout_s);
  cc.unavailable_timeout = absl::Seconds(o.unavailable_timeout_s);
  cc.resolve_interval = absl::Seconds(o.resolve_interval_s);

  if (absl::Status s = DeviceFromOptions(o, &c.device); !s.ok()) return s;
  c.metrics_port = o.metrics_port;
  c.metrics_host = o.metrics_host;
  c.mixup.mixup_alpha = o.mixup_alpha;
  c.mixup.cutmix_alpha = o.cutmix_alpha;
  c.mixup.mix_prob = o.mix_prob;
  c.mixup.switch_prob = o.switch_prob;
  c.mixup.label_smoothing = o.label_smoothing;
  c.mixup.num_classes = o.num_classes;
  return c;
}

}  // namespace stoker
