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
#include "client/loader_options.h"
#include "client/programs/ladder.h"
#include "client/stoker_client.h"
#include "client/training_loader.h"
#include "common/field_spec.h"
#include "common/log_level.h"
#include "common/log_queue.h"
#include "common/malloc_tuning.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"
#include "nlohmann/json.hpp"

namespace nb = nanobind;

namespace stoker {
namespace {

// Python exception classes by absl::StatusCode (0..16).
PyObject* g_errors[17] = {};

const char* const kErrorNames[17] = {
    "StokerError",   "Cancelled",        "Unknown",           "InvalidArgument",    "DeadlineExceeded", "NotFound",
    "AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted",          "OutOfRange",
    "Unimplemented", "Internal",         "Unavailable",       "DataLoss",           "Unauthenticated"};

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
  return Array(held->data, shape.size(), shape.data(), owner, nullptr, DlpackType(held->type), device_type, device_id);
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
      fields[f.name().c_str()] =
          nb::make_tuple(FieldKindName(f.kind()), nb::bytes(values.data(), values.size()),
                         Int64Array(std::vector<int64_t>(f.sample_offsets().begin(), f.sample_offsets().end())),
                         std::vector<int64_t>(f.item_shape().begin(), f.item_shape().end()));
    }
    info["fields"] = fields;
  }
  Array images = ImagesArray(std::move(tensor), consumer_stream, info);
  return nb::make_tuple(images, labels, indices, info);
}

// A JSON value as Python's (dict, list, str, int, float, bool, None); a
// number keeps its value (NaN stays NaN, as it would not through text).
nb::object FromJson(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      nb::dict d;
      for (const auto& [key, value] : j.items()) d[key.c_str()] = FromJson(value);
      return d;
    }
    case nlohmann::json::value_t::array: {
      nb::list l;
      for (const auto& value : j) l.append(FromJson(value));
      return l;
    }
    case nlohmann::json::value_t::string: return nb::str(j.get_ref<const std::string&>().c_str());
    case nlohmann::json::value_t::boolean: return nb::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer: return nb::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: return nb::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float: return nb::float_(j.get<double>());
    default: return nb::none();
  }
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

  // The options' fields and their table, both from include/stoker/client_options.inc.
  auto options = nb::class_<LoaderOptions>(m, "Options").def(nb::init<>());
  ForEachOptionMember([&](const OptionInfo& info, auto member) { options.def_rw(info.name, member); });
  m.def(
      "option_table",
      [] {
        nb::list table;
        const LoaderOptions defaults;
        for (const OptionInfo& info : LoaderOptionTable()) {
          nb::dict d;
          d["name"] = info.name;
          d["type"] = info.type;
          d["default"] = OptionValueText(defaults, info.name);
          d["unit"] = info.unit;
          d["python"] = info.python;
          d["help"] = info.help;
          table.append(d);
        }
        return table;
      },
      "The loader's options as stoker/client_options.inc describes them: name, type, default, unit, python, help");

  // The options read once (ToConfig: the pipeline text and the fields text
  // parsed here and nowhere else on the client), then connected.
  nb::class_<LoaderConfig>(m, "Config")
      .def_static(
          "from_options",
          [](const LoaderOptions& o) {
            absl::StatusOr<LoaderConfig> config = ToConfig(o);
            if (!config.ok()) Raise(config.status());
            return *std::move(config);
          },
          "The client's configuration from Options; raises naming a bad option (the pipeline or fields text too)")
      .def_prop_ro(
          "fields",
          [](const LoaderConfig& c) {
            std::vector<std::pair<std::string, std::string>> out;
            for (const v1::FieldSpec& f : c.client.session.fields())
              out.emplace_back(f.name(), FieldKindName(f.kind()));
            return out;
          },
          "(name, kind) of each field the session asks for, in order");

  nb::class_<TrainingLoader>(m, "Client")
      .def_static(
          "connect",
          [](const LoaderConfig& config) {
            absl::StatusOr<std::unique_ptr<TrainingLoader>> loader =
                WithoutGil([&] { return TrainingLoader::Create(config); });
            if (!loader.ok()) Raise(loader.status());
            return loader->release();
          },
          nb::rv_policy::take_ownership)
      .def_prop_ro("num_samples", [](const TrainingLoader& l) { return l.dataset().num_samples(); })
      .def_prop_ro("class_names",
                   [](const TrainingLoader& l) {
                     return std::vector<std::string>(l.dataset().class_names().begin(),
                                                     l.dataset().class_names().end());
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
      .def("stats", [](const TrainingLoader& l) { return FromJson(LoaderStatsJson(l.Stats())); });

  m.def("ladder_report", &LadderReport, nb::arg("rates"), nb::arg("servers"), nb::arg("pipeline"), nb::arg("title"),
        "The caching ladder's table, JSON and HTML for six measured rates (images/s)");
  m.def("ladder_steps", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const LadderStep& s : LadderSteps()) out.emplace_back(s.name, s.adds);
    return out;
  });
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
      "MixUp/CutMix draws of one batch (client/device/mixup.h): (lam, cutmix, (y_low, y_high, x_low, x_high), raw "
      "draws)");
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
