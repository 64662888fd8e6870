// Caption tokenisation on the data servers: SentencePiece models that the
// operator places under --data-root, loaded once per server and shared by
// every session that names them (SessionConfig.tokenizer). Thread-safe.
#ifndef STOKER_DATAPLANE_FIELDS_TOKENIZER_H_
#define STOKER_DATAPLANE_FIELDS_TOKENIZER_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <future>
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

// Largest model file a session may name (SessionConfig.tokenizer): the
// file is read whole before SentencePiece sees it. Real models are 0.2-10 MB.
inline constexpr int64_t kMaxTokenizerBytes = int64_t{64} << 20;

// OK when `bytes` have the shape of a serialised SentencePiece ModelProto:
// length-delimited fields 1-5 (pieces, trainer, normaliser, self-test,
// denormaliser) or extensions (200+), each within the bytes, and at least
// one piece. INVALID_ARGUMENT naming the offset otherwise: a tar shard, an
// image or text is refused before SentencePiece parses it.
absl::Status CheckSentencePieceModel(const std::string& bytes);

// Models by file, loaded on first use and kept (a model changed on disk is
// loaded again), failures too: a file that failed is not read again until it
// changes. Concurrent first uses of one file share one load. At most 16 are
// kept; the oldest unused one goes first.
class TokenizerCache {
 public:
  explicit TokenizerCache(std::filesystem::path data_root, int64_t max_model_bytes = kMaxTokenizerBytes)
      : data_root_(std::move(data_root)), max_model_bytes_(max_model_bytes) {}
  // `name` is relative to the data root (the rules of ResolveUnderRoot).
  // NOT_FOUND / PERMISSION_DENIED for the path; INVALID_ARGUMENT naming the
  // file when it is not a regular file, is over the size limit or is not a
  // SentencePiece model (RESOURCE_EXHAUSTED when memory ran out).
  absl::StatusOr<std::shared_ptr<const Tokenizer>> Get(const std::string& name);
  // Files read and handed to SentencePiece so far (for tests).
  int64_t loads() const { return loads_.load(); }

 private:
  using Result = absl::StatusOr<std::shared_ptr<const Tokenizer>>;
  struct Entry {
    std::shared_future<Result> result;
    int64_t mtime_ns = 0, size = 0, last_used = 0;
  };
  Result Load(const std::filesystem::path& path, const std::string& name, int64_t mtime_ns) const;

  const std::filesystem::path data_root_;
  const int64_t max_model_bytes_;
  mutable std::atomic<int64_t> loads_{0};
  absl::Mutex mu_;
  std::map<std::string, Entry> models_ ABSL_GUARDED_BY(mu_);
  int64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_FIELDS_TOKENIZER_H_
