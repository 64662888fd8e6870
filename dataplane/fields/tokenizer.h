// Caption tokenisation on the data servers: SentencePiece models that the
// operator places under --data-root, loaded once per server and shared by
// every session that names them (SessionConfig.tokenizer). Thread-safe.
#ifndef STOKER_DATAPLANE_FIELDS_TOKENIZER_H_
#define STOKER_DATAPLANE_FIELDS_TOKENIZER_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class SpmModel;

class Tokenizer {
 public:
  // `version` identifies the model file's content (path, size, mtime).
  Tokenizer(std::unique_ptr<SpmModel> model, std::string name, std::string version);
  ~Tokenizer();
  // The ids of `text`, at most `max_tokens` (0: all). bad_field naming
  // `where` when SentencePiece refuses the text.
  absl::Status Encode(const std::string& text, int max_tokens, const std::string& where,
                      std::vector<int32_t>* ids) const;
  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  // The id a padded batch is filled with: the model's pad id, else 0.
  int32_t pad_id() const;

 private:
  const std::unique_ptr<SpmModel> model_;
  const std::string name_;
  const std::string version_;
};

// Models by file, loaded on first use and kept (a model changed on disk is
// loaded again). At most 16 are kept; the oldest unused one goes first.
class TokenizerCache {
 public:
  explicit TokenizerCache(std::filesystem::path data_root) : data_root_(std::move(data_root)) {}
  // `name` is relative to the data root (the rules of ResolveUnderRoot).
  // NOT_FOUND / PERMISSION_DENIED for the path, INVALID_ARGUMENT naming the
  // file when it is not a SentencePiece model.
  absl::StatusOr<std::shared_ptr<const Tokenizer>> Get(const std::string& name);

 private:
  struct Entry {
    std::shared_ptr<const Tokenizer> tokenizer;
    int64_t mtime_ns = 0, size = 0, last_used = 0;
  };
  const std::filesystem::path data_root_;
  absl::Mutex mu_;
  std::map<std::string, Entry> models_ ABSL_GUARDED_BY(mu_);
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_FIELDS_TOKENIZER_H_
