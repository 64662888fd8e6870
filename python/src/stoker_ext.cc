// The extension module of the Python package `stoker`: a thin binding over
// stoker::TrainingLoader (client/training_loader.h). Batches leave as
// DLPack-capable arrays (nanobind ndarray, framework-neutral) whose owner is
// the batch's slot lease: the slot goes back when the consumer frees the
// tensor, ordered after the work queued on the consumer's stream. The GIL is
// released while waiting for a batch and while staging it. Errors become
// Python exceptions named after their gRPC status code (stoker.Unavailable,
// stoker.DataLoss, ...), all subclasses of stoker.StokerError.
#include <glog/logging.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "client/programs/ladder.h"
#include "client/stoker_client.h"
#include "client/training_loader.h"
#include "common/field_spec.h"
#include "common/log_level.h"
#include "common/log_queue.h"
#include "common/malloc_tuning.h"
#include "dataplane/ops/pipeline_text.h"

namespace nb = nanobind;

namespace stoker {
namespace {

// Python exception classes by absl::StatusCode (0..16).
PyObject* g_errors[17] = {};

const char* const kErrorNames[17] = {
    "StokerError",      "Cancelled",      "Unknown",           "InvalidArgument",  "DeadlineExceeded",
    "NotFound",         "AlreadyExists",  "PermissionDenied",  "ResourceExhausted", "FailedPrecondition",
    "Aborted",          "OutOfRange",     "Unimplemented",     "Internal",          "Unavailable",
    "DataLoss",         "Unauthenticated"};

void AddErrorClasses(nb::module_& m) {
  g_errors[0] = PyErr_NewException("stoker.StokerError", PyExc_RuntimeError, nullptr);
  PyObject_SetAttrString(g_errors[0], "code", nb::str("OK").ptr());
  m.attr("StokerError") = nb::handle(g_errors[0]);
  for (int code = 1; code < 17; ++code) {
    const std::string name = absl::StrCat("stoker.", kErrorNames[code]);
    g_errors[code] = PyErr_NewException(name.c_str(), g_errors[0], nullptr);
    const std::string code_name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
    PyObject_SetAttrString(g_errors[code], "code", nb::str(code_name.c_str()).ptr());
    m.attr(kErrorNames[code]) = nb::handle(g_errors[code]);
  }
}

// Raises the exception class of `status`'s code with its message.
[[noreturn]] void Raise(const absl::Status& status) {
  const int code = static_cast<int>(status.code());
  PyErr_SetString(g_errors[code > 0 && code < 17 ? code : 2], std::string(status.message()).c_str());
  throw nb::python_error();
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

// Runs `f` with the GIL released (it must not touch Python objects).
template <typename F>
auto WithoutGil(F&& f) {
  nb::gil_scoped_release release;
  return f();
}

// What the Python Loader passes in; see stoker/loader.py for the meaning of
// each field and its default.
struct Options {
  std::vector<std::string> servers;
  int local_workers = 0;
  std::string data_root = ".";
  std::vector<std::string> python_transforms;
  int python_workers = 0;
  std::string python_executable;
  double python_transform_timeout = 10;
  std::string op_plugins;
  std::string job;
  double weight = 1;
  std::string tls_ca, tls_cert, tls_key, tls_server_name, auth_token_file;
  std::string dataset;
  std::string pipeline;
  std::string fields;  // common/field_spec.h's text form; empty: none
  int64_t max_field_bytes = 0;
  std::string annotations;  // a COCO instances file under the data root
  double box_min_visibility = 0;
  std::string tokenizer;  // a SentencePiece model under the data root
  int max_tokens = 0;
  int batch_size = 256;
  uint64_t seed = 0;
  bool drop_last = false;
  int rank = 0;
  int world_size = 1;
  bool ordered = true;
  int window = 2;
  int streams_per_server = 2;
  int prefetch = 0;
  int64_t prefetch_bytes = int64_t{2} << 30;
  int max_servers = 32;
  int64_t epochs = 0;
  double connect_timeout_s = 10;
  double open_timeout_s = 1800;
  double batch_timeout_s = 120;
  double unavailable_timeout_s = 30;
  double resolve_interval_s = 5;
  std::string bad_sample_policy = "skip";
  std::string cache_mode = "none";
  std::string shuffle = "global";
  int shard_window = 0;
  std::string device = "auto";
  int gpu = 0;
  std::string dtype = "float32";
  std::string layout = "nchw";
  bool normalize = true;
  std::vector<float> mean = {0.485f, 0.456f, 0.406f};
  std::vector<float> std = {0.229f, 0.224f, 0.225f};
  int slots = 3;
  int max_slots = 32;
  double slot_wait_s = 60;
  int metrics_port = -1;
  std::string metrics_host = "0.0.0.0";
  int test_h2d_delay_ms = 0;
  // MixUp / CutMix in the stager (client/device/mixup.h); both alphas 0: off.
  double mixup_alpha = 0, cutmix_alpha = 0, mix_prob = 1, switch_prob = 0.5, label_smoothing = 0.1;
  int num_classes = 0;
};

absl::StatusOr<LoaderConfig> ToConfig(const Options& o) {
  LoaderConfig c;
  ClientConfig& cc = c.client;
  cc.servers = o.servers;
  if (o.local_workers < 0) return absl::InvalidArgumentError(absl::StrCat("local_workers = ", o.local_workers, "; must be >= 0"));
  cc.local_workers = o.local_workers;
  cc.session.set_job(o.job);
  cc.session.set_weight(o.weight);
  cc.local_data_root = o.data_root;
  cc.local_python_transforms = o.python_transforms;
  cc.local_python_workers = o.python_workers;
  if (!o.python_executable.empty()) cc.local_python_executable = o.python_executable;
  cc.local_python_timeout = absl::Seconds(o.python_transform_timeout);
  cc.local_op_plugins = o.op_plugins;
  cc.security = {o.tls_ca, o.tls_cert, o.tls_key, o.tls_server_name, o.auth_token_file};
  if (cc.servers.empty() && cc.local_workers == 0) {
    return absl::InvalidArgumentError(
        "no producers: give servers (host:port,... or dns:///name:port), local_workers >= 1 with data_root, or both");
  }
  if (o.dataset.empty()) return absl::InvalidArgumentError("dataset: a name under the servers' --data-root");
  cc.session.set_dataset(o.dataset);
  auto sample_ops = ParsePipelineText(o.pipeline.empty() ? std::string(kDefaultTrainPipeline) : o.pipeline);
  if (!sample_ops.ok()) return sample_ops.status();
  absl::StatusOr<std::vector<v1::FieldSpec>> fields =
      ParseFieldsText(o.fields, !sample_ops->empty() && (*sample_ops)[0].has_audio());
  if (!fields.ok()) return fields.status();
  for (v1::FieldSpec& f : *fields) *cc.session.add_fields() = std::move(f);
  cc.session.set_max_field_bytes(o.max_field_bytes);
  cc.session.set_annotations(o.annotations);
  cc.session.set_box_min_visibility(static_cast<float>(o.box_min_visibility));
  cc.session.set_tokenizer(o.tokenizer);
  cc.session.set_max_tokens(o.max_tokens);
  cc.session.set_batch_size(o.batch_size);
  cc.session.set_seed(o.seed);
  auto ops = ParsePipelineText(o.pipeline.empty() ? std::string(kDefaultTrainPipeline) : o.pipeline);
  if (!ops.ok()) return ops.status();
  for (v1::Op& op : *ops) *cc.session.add_pipeline() = std::move(op);
  // Servers send uint8 NHWC; the type and layout asked for are made here.
  cc.session.set_dtype(v1::UINT8);
  cc.session.set_layout(v1::NHWC);
  if (o.bad_sample_policy != "skip" && o.bad_sample_policy != "fail") {
    return absl::InvalidArgumentError(absl::StrCat("bad_sample_policy '", o.bad_sample_policy, "'; expected skip or fail"));
  }
  cc.session.set_bad_sample_policy(o.bad_sample_policy == "fail" ? v1::FAIL : v1::SKIP);
  const std::pair<const char*, v1::CacheMode> modes[] = {
      {"none", v1::CACHE_NONE}, {"batch", v1::CACHE_BATCH}, {"decoded", v1::CACHE_DECODED}, {"raw", v1::CACHE_RAW}};
  bool known = false;
  for (const auto& [name, mode] : modes) {
    if (o.cache_mode == name) {
      cc.session.set_cache_mode(mode);
      known = true;
    }
  }
  if (!known) return absl::InvalidArgumentError(absl::StrCat("cache_mode '", o.cache_mode, "'; expected none, batch, decoded or raw"));
  absl::StatusOr<v1::ShuffleOrder> shuffle = ParseShuffleOrder(o.shuffle);
  if (!shuffle.ok()) return shuffle.status();
  cc.session.set_shuffle(*shuffle);
  if (o.shard_window < 0) {
    return absl::InvalidArgumentError(absl::StrCat("shard_window ", o.shard_window, "; expected 0 (4) or more"));
  }
  cc.session.set_shard_window(o.shard_window);
  cc.drop_last = o.drop_last;
  cc.rank = o.rank;
  cc.world_size = o.world_size;
  if (o.world_size < 1 || o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", o.rank, " of world size ", o.world_size,
                                                   "; expected 0 <= rank < world_size"));
  }
  cc.ordered = o.ordered;
  cc.window_per_server = o.window;
  if (o.streams_per_server < 1) {
    return absl::InvalidArgumentError(absl::StrCat("streams_per_server ", o.streams_per_server, "; expected >= 1"));
  }
  cc.streams_per_server = o.streams_per_server;
  cc.prefetch_batches = o.prefetch;
  if (o.prefetch_bytes < 0 || o.max_servers < 0) {
    return absl::InvalidArgumentError(absl::StrCat("prefetch_bytes ", o.prefetch_bytes, ", max_servers ",
                                                   o.max_servers, "; expected >= 0"));
  }
  cc.prefetch_bytes = o.prefetch_bytes;
  cc.max_servers = o.max_servers;
  cc.epochs = o.epochs;
  cc.rpc_timeout = absl::Seconds(o.connect_timeout_s);
  cc.open_timeout = absl::Seconds(o.open_timeout_s);
  cc.batch_timeout = absl::Seconds(o.batch_timeout_s);
  cc.unavailable_timeout = absl::Seconds(o.unavailable_timeout_s);
  cc.resolve_interval = absl::Seconds(o.resolve_interval_s);

  DeviceOptions& d = c.device;
  absl::StatusOr<DeviceOptions::Device> device = ParseDevice(o.device);
  if (!device.ok()) return device.status();
  d.device = *device;
  d.gpu = o.gpu;
  if (!ParseTensorType(o.dtype.c_str(), &d.type)) {
    return absl::InvalidArgumentError(absl::StrCat("dtype '", o.dtype, "'; expected float32, float16, bfloat16 or uint8"));
  }
  if (o.layout != "nchw" && o.layout != "nhwc") {
    return absl::InvalidArgumentError(absl::StrCat("layout '", o.layout, "'; expected nchw or nhwc"));
  }
  d.layout = o.layout == "nchw" ? TensorLayout::kNCHW : TensorLayout::kNHWC;
  d.normalize = o.normalize;
  if (o.mean.size() != 3 || o.std.size() != 3) return absl::InvalidArgumentError("mean and std need 3 values (RGB)");
  for (int i = 0; i < 3; ++i) {
    if (!(o.std[i] > 0)) return absl::InvalidArgumentError(absl::StrCat("std[", i, "] = ", o.std[i], "; must be > 0"));
    d.mean[i] = o.mean[i];
    d.std[i] = o.std[i];
  }
  d.slots = o.slots;
  d.max_slots = o.max_slots;
  d.slot_wait = absl::Seconds(o.slot_wait_s);
  d.host_slots = 0;  // sized from the prefetch depth
  d.test_h2d_delay = absl::Milliseconds(o.test_h2d_delay_ms);
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

nb::dlpack::dtype DlpackType(TensorType t) {
  switch (t) {
    case TensorType::kFloat32: return nb::dtype<float>();
    case TensorType::kFloat16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case TensorType::kBFloat16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
    case TensorType::kUInt8: return nb::dtype<uint8_t>();
    case TensorType::kInt16: return nb::dtype<int16_t>();
  }
  return nb::dtype<float>();
}

using Array = nb::ndarray<nb::array_api>;

// The tensor's owner: releases the slot on the consumer's stream when the
// last framework tensor over it is freed (the DLPack deleter). With MixUp /
// CutMix the soft targets (in the same slot) go to info["targets"], held by
// the same owner.
Array ImagesArray(DeviceTensor tensor, void* consumer_stream, nb::dict& info) {
  auto* held = new DeviceTensor(std::move(tensor));
  held->set_consumer_stream(consumer_stream);
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<DeviceTensor*>(p); });
  std::vector<size_t> shape(held->shape.begin(), held->shape.end());
  const bool cuda = held->device >= 0;
  const int32_t device_type = cuda ? nb::device::cuda::value : nb::device::cpu::value;
  const int32_t device_id = cuda ? held->device : 0;
  if (held->targets != nullptr) {
    std::vector<size_t> targets_shape(held->targets_shape.begin(), held->targets_shape.end());
    info["targets"] = Array(held->targets, targets_shape.size(), targets_shape.data(), owner, nullptr,
                            nb::dtype<float>(), device_type, device_id);
  }
  return Array(held->data, shape.size(), shape.data(), owner, nullptr, DlpackType(held->type), device_type,
               device_id);
}

template <typename T>
Array Int64Array(const std::vector<T>& values) {
  auto* copy = new std::vector<int64_t>(values.begin(), values.end());
  nb::capsule owner(copy, [](void* p) noexcept { delete static_cast<std::vector<int64_t>*>(p); });
  const size_t n = copy->size();
  return Array(copy->data(), 1, &n, owner, nullptr, nb::dtype<int64_t>(), nb::device::cpu::value, 0);
}

// One delivered batch as Python sees it.
nb::tuple BatchTuple(DeviceTensor tensor, void* consumer_stream) {
  const Batch& b = tensor.batch;
  Array labels = Int64Array(b.labels);
  Array indices = Int64Array(b.sample_indices);
  nb::dict info;
  info["epoch"] = b.epoch;
  info["batch"] = b.batch_index;
  info["server"] = b.server;
  info["failed_samples"] = b.failed_samples.size();
  if (!b.failed_samples.empty()) {  // (sample index, reason, replaced by or -1), as the server said
    nb::list failures;
    for (const v1::FailedSample& f : b.failed_samples) {
      failures.append(nb::make_tuple(f.sample_index(), f.reason(), f.replaced_by()));
    }
    info["failures"] = failures;
  }
  info["receive_ms"] = absl::ToDoubleMilliseconds(b.receive_latency);
  if (!b.fields.empty()) {  // name -> (kind, the field's values, N + 1 offsets into them)
    nb::dict fields;
    for (const v1::FieldData& f : b.fields) {
      const absl::string_view values = absl::string_view(b.field_data).substr(f.offset(), f.bytes());
      fields[f.name().c_str()] = nb::make_tuple(FieldKindName(f.kind()), nb::bytes(values.data(), values.size()),
                                                Int64Array(std::vector<int64_t>(f.sample_offsets().begin(),
                                                                                f.sample_offsets().end())),
                                                std::vector<int64_t>(f.item_shape().begin(), f.item_shape().end()));
    }
    info["fields"] = fields;
  }
  Array images = ImagesArray(std::move(tensor), consumer_stream, info);
  return nb::make_tuple(images, labels, indices, info);
}

nb::dict StatsDict(const LoaderStats& s) {
  nb::dict d;
  d["batches"] = s.run.batches;
  d["images"] = s.run.images;
  d["bytes"] = s.run.bytes;
  d["seconds"] = s.run.seconds;
  d["images_per_second"] = s.run.images_per_second;
  d["megabytes_per_second"] = s.run.megabytes_per_second;
  d["starved_percent"] = s.run.starved_percent;
  d["inter_batch_p50_ms"] = s.run.inter_batch_p50_ms;
  d["inter_batch_p99_ms"] = s.run.inter_batch_p99_ms;
  d["receive_latency_p50_ms"] = s.run.receive_latency_p50_ms;
  nb::dict per_server;
  for (const auto& [server, n] : s.run.batches_per_server) per_server[server.c_str()] = n;
  d["batches_per_server"] = per_server;
  d["bottleneck"] = s.verdict.stage;
  d["bottleneck_explanation"] = s.verdict.Explain();
  nb::dict figures;
  figures["starved_ratio"] = s.verdict.starved_ratio;
  figures["storage_wait_ratio"] = s.verdict.storage_wait_ratio;
  figures["h2d_ratio"] = s.verdict.h2d_ratio;
  figures["transfer_seconds_per_batch"] = s.verdict.transfer_seconds;
  figures["server_seconds_per_batch"] = s.verdict.server_seconds;
  figures["read_seconds_per_batch"] = s.verdict.read_seconds;
  figures["compute_seconds_per_batch"] = s.verdict.compute_seconds;
  d["bottleneck_figures"] = figures;
  d["device_path"] = s.device_path;
  d["h2d_bytes"] = s.h2d_bytes;
  d["h2d_seconds"] = s.h2d_seconds;
  d["h2d_gb_per_second"] = s.h2d_seconds > 0 ? static_cast<double>(s.h2d_bytes) / 1e9 / s.h2d_seconds : 0.0;
  d["next_seconds"] = s.next_seconds;
  return d;
}

void* StreamPointer(uintptr_t stream) { return reinterpret_cast<void*>(stream); }

nb::dict LadderReport(const std::vector<double>& rates, const std::vector<std::string>& servers,
                      const std::string& pipeline, const std::string& title) {
  auto ops = ParsePipelineText(pipeline.empty() ? std::string(kDefaultTrainPipeline) : pipeline);
  if (!ops.ok()) Raise(ops.status());
  std::vector<LadderStep> steps = LadderSteps();
  if (rates.size() != steps.size()) {
    Raise(absl::InvalidArgumentError(absl::StrCat("ladder: ", rates.size(), " rates for ", steps.size(), " steps")));
  }
  for (size_t i = 0; i < steps.size(); ++i) steps[i].images_per_second = rates[i];
  const LadderResult r = AnalyzeLadder(std::move(steps), ServersShareCores(servers), 0.10, StartsWithCrop(*ops));
  nb::dict d;
  d["table"] = LadderTable(r);
  d["json"] = LadderJson(r);
  d["html"] = LadderHtml(r, title);
  return d;
}

}  // namespace
}  // namespace stoker

NB_MODULE(_stoker_ext, m) {
  using namespace stoker;
  m.doc() = "Stoker's client as a Python extension (see the stoker package)";
  AddErrorClasses(m);

  nb::class_<Options>(m, "Options")
      .def(nb::init<>())
      .def_rw("servers", &Options::servers)
      .def_rw("local_workers", &Options::local_workers)
      .def_rw("data_root", &Options::data_root)
      .def_rw("python_transforms", &Options::python_transforms)
      .def_rw("python_workers", &Options::python_workers)
      .def_rw("python_executable", &Options::python_executable)
      .def_rw("python_transform_timeout", &Options::python_transform_timeout)
      .def_rw("op_plugins", &Options::op_plugins)
      .def_rw("job", &Options::job)
      .def_rw("weight", &Options::weight)
      .def_rw("tls_ca", &Options::tls_ca)
      .def_rw("tls_cert", &Options::tls_cert)
      .def_rw("tls_key", &Options::tls_key)
      .def_rw("tls_server_name", &Options::tls_server_name)
      .def_rw("auth_token_file", &Options::auth_token_file)
      .def_rw("dataset", &Options::dataset)
      .def_rw("pipeline", &Options::pipeline)
      .def_rw("fields", &Options::fields)
      .def_rw("max_field_bytes", &Options::max_field_bytes)
      .def_rw("annotations", &Options::annotations)
      .def_rw("box_min_visibility", &Options::box_min_visibility)
      .def_rw("tokenizer", &Options::tokenizer)
      .def_rw("max_tokens", &Options::max_tokens)
      .def_rw("batch_size", &Options::batch_size)
      .def_rw("seed", &Options::seed)
      .def_rw("drop_last", &Options::drop_last)
      .def_rw("rank", &Options::rank)
      .def_rw("world_size", &Options::world_size)
      .def_rw("ordered", &Options::ordered)
      .def_rw("window", &Options::window)
      .def_rw("streams_per_server", &Options::streams_per_server)
      .def_rw("prefetch", &Options::prefetch)
      .def_rw("prefetch_bytes", &Options::prefetch_bytes)
      .def_rw("max_servers", &Options::max_servers)
      .def_rw("epochs", &Options::epochs)
      .def_rw("connect_timeout_s", &Options::connect_timeout_s)
      .def_rw("open_timeout_s", &Options::open_timeout_s)
      .def_rw("batch_timeout_s", &Options::batch_timeout_s)
      .def_rw("unavailable_timeout_s", &Options::unavailable_timeout_s)
      .def_rw("resolve_interval_s", &Options::resolve_interval_s)
      .def_rw("bad_sample_policy", &Options::bad_sample_policy)
      .def_rw("cache_mode", &Options::cache_mode)
      .def_rw("shuffle", &Options::shuffle)
      .def_rw("shard_window", &Options::shard_window)
      .def_rw("device", &Options::device)
      .def_rw("gpu", &Options::gpu)
      .def_rw("dtype", &Options::dtype)
      .def_rw("layout", &Options::layout)
      .def_rw("normalize", &Options::normalize)
      .def_rw("mean", &Options::mean)
      .def_rw("std", &Options::std)
      .def_rw("slots", &Options::slots)
      .def_rw("max_slots", &Options::max_slots)
      .def_rw("slot_wait_s", &Options::slot_wait_s)
      .def_rw("metrics_port", &Options::metrics_port)
      .def_rw("metrics_host", &Options::metrics_host)
      .def_rw("test_h2d_delay_ms", &Options::test_h2d_delay_ms)
      .def_rw("mixup_alpha", &Options::mixup_alpha)
      .def_rw("cutmix_alpha", &Options::cutmix_alpha)
      .def_rw("mix_prob", &Options::mix_prob)
      .def_rw("switch_prob", &Options::switch_prob)
      .def_rw("label_smoothing", &Options::label_smoothing)
      .def_rw("num_classes", &Options::num_classes);

  nb::class_<TrainingLoader>(m, "Client")
      .def_static(
          "connect",
          [](const Options& o) {
            absl::StatusOr<LoaderConfig> config = ToConfig(o);
            if (!config.ok()) Raise(config.status());
            absl::StatusOr<std::unique_ptr<TrainingLoader>> loader =
                WithoutGil([&] { return TrainingLoader::Create(*std::move(config)); });
            if (!loader.ok()) Raise(loader.status());
            return loader->release();
          },
          nb::rv_policy::take_ownership)
      .def_prop_ro("num_samples", [](const TrainingLoader& l) { return l.dataset().num_samples(); })
      .def_prop_ro("class_names",
                   [](const TrainingLoader& l) {
                     return std::vector<std::string>(l.dataset().class_names().begin(), l.dataset().class_names().end());
                   })
      .def_prop_ro("unlabeled_samples", [](const TrainingLoader& l) { return l.dataset().unlabeled_samples(); })
      .def_prop_ro("sample_shape",
                   [](const TrainingLoader& l) {
                     return std::vector<int64_t>(l.dataset().sample_shape().begin(), l.dataset().sample_shape().end());
                   })
      .def_prop_ro("batches_per_epoch", &TrainingLoader::BatchesPerEpoch)
      .def_prop_ro("metrics_port", &TrainingLoader::metrics_port)
      .def_prop_ro("device_path", [](const TrainingLoader& l) { return std::string(l.device_path()); })
      .def("start_epoch",
           [](TrainingLoader& l, int64_t epoch) { Check(WithoutGil([&] { return l.StartEpoch(epoch); })); })
      .def("resume",
           [](TrainingLoader& l, nb::bytes position) {
             v1::ClientPosition p;
             if (!p.ParseFromArray(position.c_str(), static_cast<int>(position.size()))) {
               Raise(absl::InvalidArgumentError("the saved loader position is not a stoker.v1.ClientPosition"));
             }
             Check(WithoutGil([&] { return l.Resume(p); }));
           })
      .def("position",
           [](const TrainingLoader& l) {
             const std::string bytes = l.Position().SerializeAsString();
             return nb::bytes(bytes.data(), bytes.size());
           })
      .def(
          "next",
          [](TrainingLoader& l, uintptr_t stream, bool wait) -> nb::object {
            DeviceTensor tensor;
            const absl::StatusOr<bool> got = WithoutGil([&] { return l.Next(StreamPointer(stream), wait, &tensor); });
            if (!got.ok()) Raise(got.status());
            if (!*got) return nb::none();
            return BatchTuple(std::move(tensor), StreamPointer(stream));
          },
          nb::arg("stream") = 0, nb::arg("wait") = false,
          "The next batch (images, labels, sample indices, info) or None at the end of the epoch")
      .def("cache_one_batch", [](TrainingLoader& l) { Check(WithoutGil([&] { return l.CacheOneBatch(); })); })
      .def(
          "stage_cached",
          [](TrainingLoader& l, uintptr_t stream, bool wait) {
            absl::StatusOr<DeviceTensor> t = WithoutGil([&] { return l.StageCached(StreamPointer(stream), wait); });
            if (!t.ok()) Raise(t.status());
            return BatchTuple(*std::move(t), StreamPointer(stream));
          },
          nb::arg("stream") = 0, nb::arg("wait") = false)
      .def("stats", [](const TrainingLoader& l) { return StatsDict(l.Stats()); });

  m.def("ladder_report", &LadderReport, nb::arg("rates"), nb::arg("servers"), nb::arg("pipeline"), nb::arg("title"),
        "The caching ladder's table, JSON and HTML for six measured rates (images/s)");
  m.def("ladder_steps", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const LadderStep& s : LadderSteps()) out.emplace_back(s.name, s.adds);
    return out;
  });
  m.def(
      "parse_fields",
      [](const std::string& text, const std::string& pipeline) {
        auto ops = ParsePipelineText(pipeline.empty() ? std::string(kDefaultTrainPipeline) : pipeline);
        absl::StatusOr<std::vector<v1::FieldSpec>> fields =
            ParseFieldsText(text, ops.ok() && !ops->empty() && (*ops)[0].has_audio());
        if (!fields.ok()) Raise(fields.status());
        std::vector<std::pair<std::string, std::string>> out;
        for (const v1::FieldSpec& f : *fields) out.emplace_back(f.name(), FieldKindName(f.kind()));
        return out;
      },
      nb::arg("text"), nb::arg("pipeline") = "",
      "(name, kind) of each field in a fields text (README 'Fields') for a pipeline text, in order; raises "
      "InvalidArgument");
  m.def(
      "epoch_order",
      [](uint64_t seed, int64_t epoch, int64_t num_samples, int64_t batch_size, const std::string& shuffle,
         const std::vector<int64_t>& shard_sizes, int shard_window, int rank, int world_size) {
        absl::StatusOr<v1::ShuffleOrder> order = ParseShuffleOrder(shuffle);
        if (!order.ok()) Raise(order.status());
        if (num_samples < 0 || batch_size < 1 || world_size < 1 || rank < 0 || rank >= world_size) {
          Raise(absl::InvalidArgumentError("epoch_order: num_samples >= 0, batch_size >= 1, 0 <= rank < world_size"));
        }
        const ShardLayout layout = MakeShardLayout(shard_sizes, shard_window);
        const EpochPlan plan(seed, epoch, num_samples, batch_size, /*drop_last=*/false, rank, world_size, true,
                             *order == v1::SHUFFLE_SHARDS ? &layout : nullptr);
        if (*order == v1::SHUFFLE_SHARDS && !plan.shard_aware()) {
          Raise(absl::InvalidArgumentError("epoch_order: shard_sizes must be positive and add up to num_samples"));
        }
        const std::vector<int64_t>& o = plan.order();
        std::vector<int64_t> lanes(static_cast<size_t>(plan.num_batches()));
        for (size_t b = 0; b < lanes.size(); ++b) lanes[b] = plan.BatchLane(static_cast<int64_t>(b));
        return nb::make_tuple(nb::bytes(reinterpret_cast<const char*>(o.data()), o.size() * sizeof(int64_t)),
                              nb::bytes(reinterpret_cast<const char*>(lanes.data()), lanes.size() * sizeof(int64_t)));
      },
      nb::arg("seed"), nb::arg("epoch"), nb::arg("num_samples"), nb::arg("batch_size"), nb::arg("shuffle"),
      nb::arg("shard_sizes") = std::vector<int64_t>{}, nb::arg("shard_window") = 0, nb::arg("rank") = 0,
      nb::arg("world_size") = 1,
      "A rank's sample order of an epoch as the client computes it (common/epoch_plan.h) and each batch's lane "
      "(-1 in the global order), both as int64 bytes (numpy.frombuffer(..., dtype=numpy.int64)); for benchmarks "
      "and tests");
  m.def(
      "mix_draw",
      [](double mixup_alpha, double cutmix_alpha, double mix_prob, double switch_prob, uint64_t seed, int64_t epoch,
         int64_t batch, int64_t height, int64_t width) {
        MixupOptions o;
        o.mixup_alpha = mixup_alpha;
        o.cutmix_alpha = cutmix_alpha;
        o.mix_prob = mix_prob;
        o.switch_prob = switch_prob;
        o.seed = seed;
        Check(ValidateMixup(o));
        if (height < 1 || width < 1) Raise(absl::InvalidArgumentError("mix_draw: height and width must be >= 1"));
        const MixDraw d = DrawMix(o, epoch, batch, height, width);
        return nb::make_tuple(d.lam, d.cutmix, nb::make_tuple(d.box[0], d.box[1], d.box[2], d.box[3]), d.raw);
      },
      nb::arg("mixup_alpha"), nb::arg("cutmix_alpha"), nb::arg("mix_prob"), nb::arg("switch_prob"), nb::arg("seed"),
      nb::arg("epoch"), nb::arg("batch"), nb::arg("height"), nb::arg("width"),
      "MixUp/CutMix draws of one batch (client/device/mixup.h): (lam, cutmix, (y_low, y_high, x_low, x_high), raw draws)");
  m.def("tune_malloc", &TuneMallocForLargeBuffers,
        "Keeps large buffers on the heap for reuse (see common/malloc_tuning.h); call once at start-up");
  m.def("cuda_usable", [](int gpu) {
    const absl::Status s = CudaUsable(gpu);
    return s.ok() ? std::string() : std::string(s.message());
  });
  // glog's messages reach Python's logging (stoker/_logging.py) through a
  // queue: C++ threads never take the GIL to log.
  m.def("init_logging", [](int min_level) {
    static bool done = false;
    if (!done) google::InitGoogleLogging("stoker");
    done = true;
    InstallProcessLogQueue(min_level);
  });
  m.def("set_log_level", [](int min_level) { FLAGS_minloglevel = min_level; });
  m.def("parse_log_level", [](const std::string& level) {
    const absl::StatusOr<int> parsed = ParseLogLevel(level);
    if (!parsed.ok()) throw nb::value_error(std::string(parsed.status().message()).c_str());
    return *parsed;
  });
  // [(severity, file, line, message bytes)], waiting up to timeout_s with the
  // GIL released; None once the queue is closed and empty. Bytes: a message
  // need not be UTF-8 (a path, glog's cut at its length limit).
  m.def("take_log_records", [](double timeout_s) -> nb::object {
    LogQueue* queue = ProcessLogQueue();
    if (queue == nullptr) return nb::none();
    std::vector<LogRecord> records;
    bool open;
    {
      nb::gil_scoped_release release;
      open = queue->Take(absl::Seconds(timeout_s), &records);
    }
    if (!open) return nb::none();
    nb::list out;
    for (const LogRecord& r : records) {
      out.append(nb::make_tuple(r.severity, nb::bytes(r.file.data(), r.file.size()), r.line,
                                nb::bytes(r.message.data(), r.message.size())));
    }
    return out;
  });
  m.def("close_log_queue", [] { UninstallProcessLogQueue(); });
}
