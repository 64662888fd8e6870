// Stoker's client for C++ training jobs: a header-only C++17 API over the C
// ABI (stoker/c_api.h), of standard types only. No C++ symbol crosses the
// library boundary, so it works whatever the job's standard library ABI
// (_GLIBCXX_USE_CXX11_ABI=0 included), and nothing of gRPC, protobuf, Abseil
// or OpenCV is in its include closure. Link libstoker_client.so
// (find_package(Stoker COMPONENTS client): Stoker::client; or pkg-config
// stoker-client).
//
//   stoker::ClientOptions o;
//   o.servers = "dns:///stoker.svc:50051"; o.dataset = "imagenet/train";
//   o.batch_size = 256; o.seed = 7;
//   auto c = stoker::Client::Open(o);
//   if (!c.ok()) die(c.status().message());
//   (*c)->SetEpoch(epoch);
//   while (true) {
//     auto b = (*c)->Next();                  // null at the epoch's end
//     if (!b.ok()) die(b.status().message());
//     if (!*b) break;
//     use((*b)->image(), (*b)->labels(), (*b)->size());  // released with the Batch
//   }
//
// A Client is used by one thread at a time. docs/how-to/use-from-cpp.md.
#ifndef STOKER_CLIENT_H_
#define STOKER_CLIENT_H_

#include <cstdint>
#include <cstdlib>
#include <locale>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "stoker/c_api.h"

namespace stoker {

// A call's outcome: ok, or a code (stoker_code, gRPC's numbering) and the
// library's message.
class Status {
 public:
  Status() = default;
  Status(stoker_code code, std::string message) : code_(code), message_(std::move(message)) {}
  bool ok() const { return code_ == STOKER_OK; }
  stoker_code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  stoker_code code_ = STOKER_OK;
  std::string message_;
};

// A value or the Status that says why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit, as absl::StatusOr
  // A failure; an ok Status without a value would be a Result with none:
  // it becomes UNKNOWN.
  Result(Status status)  // NOLINT
      : status_(status.ok() ? Status(STOKER_UNKNOWN, "a Result made from an ok Status has no value")
                            : std::move(status)) {}
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

// One option's value as the C ABI reads it (text), or unset: the library's
// default. Assign the option's type (a number, a bool, a string, a list) or
// its text ("a:50051,b:50051" for a list).
template <typename T>
class Setting {
 public:
  Setting() = default;
  Setting& operator=(const T& value) {
    text_ = Text(value);
    return *this;
  }
  template <typename S, typename = std::enable_if_t<std::is_convertible_v<S, std::string_view> &&
                                                    !std::is_same_v<std::decay_t<S>, T>>>
  Setting& operator=(const S& text) {
    text_ = std::string(std::string_view(text));
    return *this;
  }
  bool set() const { return text_.has_value(); }
  const std::string& text() const { return *text_; }
  void reset() { text_.reset(); }

 private:
  static std::string Text(const std::string& v) { return v; }
  static std::string Text(bool v) { return v ? "true" : "false"; }
  template <typename U>
  static std::string Text(const std::vector<U>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i > 0 ? "," : "") + Text(v[i]);
    return out;
  }
  template <typename U, typename = std::enable_if_t<std::is_arithmetic_v<U>>>
  static std::string Text(U v) {
    std::ostringstream out;
    out.imbue(std::locale::classic());  // "1800", "0.5": whatever the program's global locale
    out.precision(17);
    out << v;
    return out.str();
  }
  std::optional<std::string> text_;
};

// The loader's options, one member per line of stoker/client_options.inc
// (the one description: the Python Loader's keywords are the same options;
// docs/reference/python.md lists them with units and defaults). The device is
// "cpu", "cuda" or "cuda:N" ("auto" by default).
struct ClientOptions {
#define STOKER_OPTION(type, name, default_value, unit, python, help) Setting<type> name;
#include "stoker/client_options.inc"
#undef STOKER_OPTION

  // Sets the option called `name` from its text (a command line's
  // name=value); false if there is no such option. Open checks the text.
  bool Set(std::string_view name, std::string_view text) {
#define STOKER_OPTION(type, option, default_value, unit, python, help) \
  if (name == #option) {                                               \
    option = text;                                                     \
    return true;                                                       \
  }
#include "stoker/client_options.inc"
#undef STOKER_OPTION
    return false;
  }
};

namespace internal {
inline Status LastError(stoker_code code) { return Status(code, stoker_last_error()); }
}  // namespace internal

// One batch, holding its slot until destroyed (or Release); it keeps its
// client open until then, whatever is destroyed first.
class Batch {
 public:
  Batch(std::shared_ptr<stoker_client> client, stoker_batch* batch) : client_(std::move(client)), batch_(batch) {}
  ~Batch() { Release(); }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  int64_t size() const { return stoker_batch_size(batch_); }
  int64_t epoch() const { return stoker_batch_epoch(batch_); }
  int64_t index() const { return stoker_batch_index(batch_); }
  // The image tensor: data, dtype, layout, shape, device (-1: host) and, on
  // CUDA, the event recorded when it is ready.
  stoker_tensor image() const {
    stoker_tensor t{};
    stoker_batch_image(batch_, &t);
    return t;
  }
  // With MixUp or CutMix: the soft targets, float32 [N, num_classes] on the
  // image's device (stoker_batch_targets); nullopt without them.
  std::optional<stoker_tensor> targets() const {
    stoker_tensor t{};
    if (stoker_batch_targets(batch_, &t) != STOKER_OK) return std::nullopt;
    return t;
  }
  // size() class ids and sample indices, valid while the batch lives.
  const int32_t* labels() const { return stoker_batch_labels(batch_); }
  const int64_t* sample_indices() const { return stoker_batch_sample_indices(batch_); }
  // The fields asked for (stoker_field: name, kind, values, byte offsets).
  int field_count() const { return stoker_batch_field_count(batch_); }
  stoker_field field(int i) const {
    stoker_field f{};
    stoker_batch_field(batch_, i, &f);
    return f;
  }
  // The field called `name`, if the batch has it.
  std::optional<stoker_field> field(std::string_view name) const {
    for (int i = 0; i < field_count(); ++i) {
      if (name == field(i).name) return field(i);
    }
    return std::nullopt;
  }
  // Gives the slot back once the work queued so far on `cuda_stream` (a
  // cudaStream_t; null: the legacy default stream) has run.
  void Release(void* cuda_stream = nullptr) {
    if (batch_ != nullptr) stoker_batch_release(batch_, cuda_stream);
    batch_ = nullptr;
  }

 private:
  std::shared_ptr<stoker_client> client_;  // closed after its last batch is released
  stoker_batch* batch_;
};

class Client {
 public:
  // Checks every option, connects and opens the session.
  static Result<std::unique_ptr<Client>> Open(const ClientOptions& options) {
    std::unique_ptr<stoker_options, void (*)(stoker_options*)> o(stoker_options_new(), stoker_options_free);
    if (o == nullptr) return Status(STOKER_RESOURCE_EXHAUSTED, "stoker_options_new: out of memory");
#define STOKER_OPTION(type, name, default_value, unit, python, help)                       \
  if (options.name.set()) {                                                                \
    if (stoker_code c = stoker_options_set(o.get(), #name, options.name.text().c_str())) { \
      return internal::LastError(c);                                                       \
    }                                                                                      \
  }
#include "stoker/client_options.inc"
#undef STOKER_OPTION
    stoker_client* client = nullptr;
    if (stoker_code c = stoker_client_open(o.get(), &client)) return internal::LastError(c);
    return std::unique_ptr<Client>(new Client(client));
  }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  int64_t num_samples() const { return stoker_client_num_samples(client_.get()); }
  int64_t batches_per_epoch() const { return stoker_client_batches_per_epoch(client_.get()); }
  // The epoch the next batches come from: the running one (a restored
  // state's after Restore), else the one selected.
  int64_t epoch() const { return stoker_client_epoch(client_.get()); }

  // Selects the epoch the next batches come from (stoker_client_set_epoch).
  Status SetEpoch(int64_t epoch) { return Check(stoker_client_set_epoch(client_.get(), epoch)); }
  // The next batch of the running epoch; null once it has ended (the next
  // call starts the epoch after it).
  Result<std::unique_ptr<Batch>> Next(void* cuda_stream = nullptr) {
    stoker_batch* b = nullptr;
    if (stoker_code c = stoker_client_next(client_.get(), cuda_stream, &b)) return internal::LastError(c);
    return b == nullptr ? std::unique_ptr<Batch>() : std::make_unique<Batch>(client_, b);
  }
  // Where this rank stands, for a checkpoint; Restore continues from it.
  Result<std::string> State() const {
    void* data = nullptr;
    size_t size = 0;
    if (stoker_code c = stoker_client_state(client_.get(), &data, &size)) return internal::LastError(c);
    std::string bytes(static_cast<const char*>(data), size);
    stoker_free(data);
    return bytes;
  }
  Status Restore(std::string_view state) {
    return Check(stoker_client_restore(client_.get(), state.data(), state.size()));
  }
  // The run's statistics and bottleneck verdict, as JSON.
  Result<std::string> StatsJson() const {
    char* json = nullptr;
    if (stoker_code c = stoker_client_stats_json(client_.get(), &json)) return internal::LastError(c);
    std::string out(json);
    stoker_free(json);
    return out;
  }

 private:
  explicit Client(stoker_client* client) : client_(client, stoker_client_close) {}
  static Status Check(stoker_code c) { return c == STOKER_OK ? Status() : internal::LastError(c); }
  std::shared_ptr<stoker_client> client_;  // shared with the batches handed out
};

}  // namespace stoker

#endif  // STOKER_CLIENT_H_
