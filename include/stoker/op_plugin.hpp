// Header-only C++ wrapper over the op plugin C ABI (stoker/op_plugin.h).
// An op is a class with a constructor from its arguments and a const Apply:
//
//   class Solarize {
//    public:
//     explicit Solarize(const stoker::plugin::Args& args) : threshold_(args.Int("threshold", 128, 0, 256)) {}
//     void Apply(stoker::plugin::Sample& sample, stoker::plugin::Rng& rng) const { ... }
//    private:
//     int threshold_;
//   };
//   const char* const kParams[] = {"threshold", nullptr};
//   STOKER_OP_PLUGIN("example", stoker::plugin::Op<Solarize>("example.solarize", "doc", kParams, /*random=*/false));
//
// An op whose output size differs from its input's also has
//   int32_t OutputSize(int32_t* height, int32_t* width) const;  // a StokerOutputSize
// and makes its output with sample.Replace(height, width).
//
// Errors are stoker::plugin::Error exceptions, thrown from the constructor
// (a bad argument: the session is refused with the message) or from Apply
// (the sample fails with it); no exception crosses the C ABI. The server may
// construct an op more than once for one session, and from several threads
// for several sessions; Apply runs on many threads at once with the same
// object: it must only read its members.
#ifndef STOKER_OP_PLUGIN_HPP_
#define STOKER_OP_PLUGIN_HPP_

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "stoker/op_plugin.h"

namespace stoker {
namespace plugin {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// The op's arguments from the pipeline text. Each lookup names the
// argument; a wrong type or a value out of range throws Error naming it.
class Args {
 public:
  Args(const StokerArgument* args, int32_t n) : args_(args), n_(n) {}

  int64_t Int(const char* name, int64_t otherwise, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const {
    const StokerArgument* a = Find(name);
    if (a == nullptr) return otherwise;
    if (a->type != STOKER_ARG_INT) throw Error(std::string(name) + " must be an integer");
    if (a->int_value < lo || a->int_value > hi) {
      throw Error(std::string(name) + " = " + std::to_string(a->int_value) + "; allowed range is " +
                  std::to_string(lo) + ".." + std::to_string(hi));
    }
    return a->int_value;
  }
  double Float(const char* name, double otherwise, double lo = -1e300, double hi = 1e300) const {
    const StokerArgument* a = Find(name);
    if (a == nullptr) return otherwise;
    if (a->type != STOKER_ARG_FLOAT && a->type != STOKER_ARG_INT) throw Error(std::string(name) + " must be a number");
    const double v = a->type == STOKER_ARG_INT ? static_cast<double>(a->int_value) : a->float_value;
    if (!(v >= lo && v <= hi)) {
      char text[160];
      std::snprintf(text, sizeof(text), "%s = %g; allowed range is %g..%g", name, v, lo, hi);
      throw Error(text);
    }
    return v;
  }
  bool Bool(const char* name, bool otherwise) const {
    const StokerArgument* a = Find(name);
    if (a == nullptr) return otherwise;
    if (a->type != STOKER_ARG_BOOL) throw Error(std::string(name) + " must be true or false");
    return a->int_value != 0;
  }
  std::string String(const char* name, const std::string& otherwise) const {
    const StokerArgument* a = Find(name);
    if (a == nullptr) return otherwise;
    if (a->type != STOKER_ARG_STRING) throw Error(std::string(name) + " must be a string");
    return a->string_value;
  }
  // Throws naming an argument no lookup asked for (a typo in the pipeline).
  void CheckAllUsed() const {
    for (int32_t i = 0; i < n_; ++i) {
      if (used_.count(args_[i].name) == 0) throw Error(std::string("has no argument '") + args_[i].name + "'");
    }
  }

 private:
  const StokerArgument* Find(const char* name) const {
    used_.insert(name);
    for (int32_t i = 0; i < n_; ++i) {
      if (std::strcmp(args_[i].name, name) == 0) return &args_[i];
    }
    return nullptr;
  }
  const StokerArgument* args_;
  int32_t n_;
  mutable std::set<std::string> used_;
};

// The sample's generator (the stream the built-in ops draw from).
class Rng {
 public:
  explicit Rng(StokerRng* rng) : rng_(rng) {}
  uint64_t Next() { return rng_->next(rng_->state); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }

 private:
  StokerRng* rng_;
};

// The sample's 8-bit RGB image, to change in place or to replace by one of
// another size.
class Sample {
 public:
  Sample(StokerImage* image, StokerAllocator* allocator, StokerFields* fields = nullptr)
      : image_(image), allocator_(allocator), fields_(fields) {}
  int height() const { return image_->height; }
  int width() const { return image_->width; }
  uint8_t* row(int y) { return image_->data + y * image_->stride; }
  const uint8_t* row(int y) const { return image_->data + y * image_->stride; }
  // A new image of height x width that becomes the sample's when Apply
  // returns; the old one stays readable (as `input`) until then.
  StokerImage Replace(int height, int width) {
    if (replaced_) throw Error("Replace may be called once per sample");
    replaced_ = true;
    StokerImage* made = allocator_->allocate(allocator_->host, height, width);
    if (made == nullptr) {
      throw Error("an output of " + std::to_string(width) + "x" + std::to_string(height) +
                  " pixels is over the server's --max-pixels");
    }
    return *made;
  }
  const StokerImage& input() const { return *image_; }

  // A value field of the sample (encoded as its kind says, see StokerField),
  // or nullptr when the session has no field of that name.
  const StokerField* field(const char* name) const {
    for (int32_t i = 0; fields_ != nullptr && i < fields_->count; ++i) {
      if (std::strcmp(fields_->fields[i].name, name) == 0) return &fields_->fields[i];
    }
    return nullptr;
  }
  std::string_view FieldBytes(const char* name) const {
    const StokerField* f = field(name);
    if (f == nullptr) throw Error(std::string("the session has no field '") + name + "'");
    return std::string_view(reinterpret_cast<const char*>(f->data), static_cast<size_t>(f->size));
  }
  // Replaces a field's value (checked by the server as its kind once Apply returns).
  void SetField(const char* name, std::string_view bytes) {
    const StokerField* f = field(name);
    if (f == nullptr) throw Error(std::string("the session has no field '") + name + "'");
    fields_->replace(fields_->host, static_cast<int32_t>(f - fields_->fields),
                     reinterpret_cast<const uint8_t*>(bytes.data()), static_cast<int64_t>(bytes.size()));
  }

 private:
  StokerImage* image_;
  StokerAllocator* allocator_;
  StokerFields* fields_;
  bool replaced_ = false;
};

namespace internal {

inline void Write(char* error, size_t size, const char* message) {
  if (size == 0) return;
  std::snprintf(error, size, "%s", message);
}

template <typename T>
void* Create(const StokerArgument* args, int32_t n, char* error, size_t size) {
  try {
    Args a(args, n);
    T* op = new T(a);
    try {
      a.CheckAllUsed();
    } catch (...) {
      delete op;
      throw;
    }
    return op;
  } catch (const std::exception& e) {
    Write(error, size, e.what());
  } catch (...) {
    Write(error, size, "unknown error");
  }
  return nullptr;
}

template <typename T>
void Destroy(void* state) {
  delete static_cast<T*>(state);
}

template <typename T>
int32_t Apply(const void* state, StokerImage* image, StokerRng* rng, StokerAllocator* allocator, StokerFields* fields,
              char* error, size_t size) {
  try {
    Sample sample(image, allocator, fields);
    Rng r(rng);
    static_cast<const T*>(state)->Apply(sample, r);
    return 0;
  } catch (const std::exception& e) {
    Write(error, size, e.what());
  } catch (...) {
    Write(error, size, "unknown error");
  }
  return 1;
}

// T::OutputSize(int* h, int* w) when it has one, else "keeps".
template <typename T>
auto Size(const void* state, int32_t* h, int32_t* w, int) -> decltype(static_cast<const T*>(state)->OutputSize(h, w)) {
  return static_cast<const T*>(state)->OutputSize(h, w);
}
template <typename T>
int32_t Size(const void*, int32_t*, int32_t*, long) {
  return STOKER_SIZE_KEEPS;
}
template <typename T>
int32_t OutputSize(const void* state, int32_t* h, int32_t* w) {
  try {
    return Size<T>(state, h, w, 0);
  } catch (...) {  // never across the C ABI
    return STOKER_SIZE_VARIES;
  }
}

}  // namespace internal

// The table entry of op class T. `params`: its positional parameters, a
// static NULL-terminated array. `random`: whether Apply draws from the Rng.
template <typename T>
constexpr StokerOpInfo Op(const char* name, const char* doc, const char* const* params, bool random) {
  return StokerOpInfo{name,
                      doc,
                      params,
                      random ? 1 : 0,
                      &internal::Create<T>,
                      &internal::Destroy<T>,
                      &internal::OutputSize<T>,
                      &internal::Apply<T>};
}

}  // namespace plugin
}  // namespace stoker

// Defines the plugin's entry point with its table of ops.
#define STOKER_OP_PLUGIN(plugin_name, ...)                                                                       \
  extern "C" __attribute__((visibility("default"))) const StokerPluginInfo* stoker_op_plugin(void) {           \
    static const StokerOpInfo ops[] = {__VA_ARGS__};                                                            \
    static const StokerPluginInfo info = {STOKER_OP_PLUGIN_ABI_VERSION, plugin_name,                            \
                                          static_cast<int32_t>(sizeof(ops) / sizeof(ops[0])), ops};             \
    return &info;                                                                                               \
  }

#endif  // STOKER_OP_PLUGIN_HPP_
