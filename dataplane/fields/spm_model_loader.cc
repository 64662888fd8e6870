#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "dataplane/fields/spm_model.h"

namespace stoker {
namespace {

// The shim's C functions (spm_model.cc).
struct SpmApi {
  void* (*load)(const char*, size_t, char*, size_t) = nullptr;
  void (*unload)(void*) = nullptr;
  int (*encode)(void*, const char*, size_t, int**, size_t*, char*, size_t) = nullptr;
  void (*free_ids)(int*) = nullptr;
  int (*pad_id)(void*) = nullptr;
  std::string error;  // why it is not available
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STOKER_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define STOKER_SANITIZED 1
#endif
#endif

// Where the module may be: $STOKER_SPM_MODULE, beside this binary (or the
// library holding this code), and where the build put it.
std::vector<std::string> Candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("STOKER_SPM_MODULE")) out.push_back(env);
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&Candidates), &info) != 0 && info.dli_fname != nullptr) {
    out.push_back((std::filesystem::path(info.dli_fname).parent_path() / "libstoker_spm.so").string());
  }
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path() / "libstoker_spm.so").string());
  return out;
}

const SpmApi& Api() {
  static const SpmApi* api = [] {
    auto* a = new SpmApi();
#ifdef STOKER_SANITIZED
    a->error = "SentencePiece is not loaded in sanitizer builds (RTLD_DEEPBIND is incompatible with them)";
    return a;
#else
    std::string tried;
    for (const std::string& path : Candidates()) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle == nullptr) {
        tried += (tried.empty() ? "" : "; ") + path + ": " + dlerror();
        continue;
      }
      a->load = reinterpret_cast<decltype(a->load)>(dlsym(handle, "stoker_spm_load_bytes"));
      a->unload = reinterpret_cast<decltype(a->unload)>(dlsym(handle, "stoker_spm_unload"));
      a->encode = reinterpret_cast<decltype(a->encode)>(dlsym(handle, "stoker_spm_encode"));
      a->free_ids = reinterpret_cast<decltype(a->free_ids)>(dlsym(handle, "stoker_spm_free"));
      a->pad_id = reinterpret_cast<decltype(a->pad_id)>(dlsym(handle, "stoker_spm_pad_id"));
      if (a->load && a->unload && a->encode && a->free_ids && a->pad_id) return a;
      tried += (tried.empty() ? "" : "; ") + path + ": lacks the stoker_spm functions";
      *a = SpmApi();
    }
    a->error = "SentencePiece support (libstoker_spm.so) was not found: " + tried;
    return a;
#endif
  }();
  return *api;
}

}  // namespace

struct SpmModel::Impl {
  void* model = nullptr;
};

SpmModel::SpmModel() : impl_(new Impl) {}
SpmModel::~SpmModel() {
  if (impl_->model != nullptr) Api().unload(impl_->model);
}

bool SpmModel::Available(std::string* error) {
  if (Api().load != nullptr) return true;
  *error = Api().error;
  return false;
}

std::unique_ptr<SpmModel> SpmModel::Load(const std::string& bytes, std::string* error) {
  if (!Available(error)) return nullptr;
  char message[512] = "";
  void* model = Api().load(bytes.data(), bytes.size(), message, sizeof(message));
  if (model == nullptr) {
    *error = message;
    return nullptr;
  }
  std::unique_ptr<SpmModel> out(new SpmModel());
  out->impl_->model = model;
  return out;
}

bool SpmModel::Encode(const std::string& text, std::vector<int>* ids, std::string* error) const {
  char message[512] = "";
  int* raw = nullptr;
  size_t n = 0;
  if (Api().encode(impl_->model, text.data(), text.size(), &raw, &n, message, sizeof(message)) != 0) {
    *error = message;
    return false;
  }
  ids->assign(raw, raw + n);
  Api().free_ids(raw);
  return true;
}

int SpmModel::pad_id() const { return Api().pad_id(impl_->model); }

}  // namespace stoker
