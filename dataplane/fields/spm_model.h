// A SentencePiece model, through the module libstoker_spm.so (spm_model.cc),
// which spm_model_loader.cc loads on first use with dlopen: Debian's
// libsentencepiece exports its own copy of protobuf, which cannot share a
// process's global symbols with libprotobuf. Immutable after Load; Encode is
// thread-safe (SentencePiece's processor is const-safe).
#ifndef STOKER_DATAPLANE_FIELDS_SPM_MODEL_H_
#define STOKER_DATAPLANE_FIELDS_SPM_MODEL_H_

#include <memory>
#include <string>
#include <vector>

namespace stoker {

class SpmModel {
 public:
  // The model serialised in `bytes` (a .model file's contents); null with
  // *error set when they are not a SentencePiece model or it cannot be made.
  static std::unique_ptr<SpmModel> Load(const std::string& bytes, std::string* error);
  // Whether the module could be loaded; *error says why not (not found, a
  // sanitizer build).
  static bool Available(std::string* error);
  ~SpmModel();

  // The ids SentencePiece's EncodeAsIds gives; false with *error set on failure.
  bool Encode(const std::string& text, std::vector<int>* ids, std::string* error) const;
  int pad_id() const;

 private:
  SpmModel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_FIELDS_SPM_MODEL_H_
