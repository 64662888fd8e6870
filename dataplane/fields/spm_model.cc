// The SentencePiece shim: built alone as the module libstoker_spm.so and
// loaded with dlopen (spm_model_loader.cc). Debian's libsentencepiece carries
// its own copy of protobuf and exports it; linked into a process that also
// loads libprotobuf (gRPC does), the two copies collide at start-up. Loaded
// locally with RTLD_DEEPBIND, it keeps to its own copy. Only the C functions
// below are exported. No Abseil header may be included here (SentencePiece's
// header declares its own absl::string_view).
#include <sentencepiece_processor.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

void Copy(const std::string& text, char* out, size_t size) {
  if (size == 0) return;
  std::strncpy(out, text.c_str(), size - 1);
  out[size - 1] = '\0';
}

}  // namespace

#define STOKER_SPM_EXPORT extern "C" __attribute__((visibility("default")))

// The model from its serialised bytes (ModelProto). No exception leaves a
// function of the shim: a failure (bad_alloc included) is a message.
STOKER_SPM_EXPORT void* stoker_spm_load_bytes(const char* data, size_t size, char* error, size_t error_size) {
  try {
    auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = processor->LoadFromSerializedProto(std::string_view(data, size));
    if (!status.ok()) {
      Copy(status.ToString(), error, error_size);
      return nullptr;
    }
    return processor.release();
  } catch (const std::exception& e) {
    Copy(std::string("loading the model failed: ") + e.what(), error, error_size);
  } catch (...) {
    Copy("loading the model failed", error, error_size);
  }
  return nullptr;
}

STOKER_SPM_EXPORT void stoker_spm_unload(void* model) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(model);
}

// *ids is malloc'ed (free with stoker_spm_free); 0 on success.
STOKER_SPM_EXPORT int stoker_spm_encode(void* model, const char* text, size_t length, int** ids, size_t* count,
                                        char* error, size_t error_size) {
  std::vector<int> out;
  try {
    const auto status =
        static_cast<sentencepiece::SentencePieceProcessor*>(model)->Encode(std::string_view(text, length), &out);
    if (!status.ok()) {
      Copy(status.ToString(), error, error_size);
      return 1;
    }
  } catch (const std::exception& e) {
    Copy(std::string("encoding failed: ") + e.what(), error, error_size);
    return 1;
  }
  *count = out.size();
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (out.empty() ? 1 : out.size())));
  if (*ids == nullptr) {
    Copy("out of memory", error, error_size);
    return 1;
  }
  if (!out.empty()) std::memcpy(*ids, out.data(), sizeof(int) * out.size());
  return 0;
}

STOKER_SPM_EXPORT void stoker_spm_free(int* ids) { std::free(ids); }

STOKER_SPM_EXPORT int stoker_spm_pad_id(void* model) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(model)->pad_id();
}
