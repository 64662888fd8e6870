#include "dataplane/fields/tokenizer.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "dataplane/sources/dataset.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/fields/spm_model.h"

namespace stoker {

Tokenizer::Tokenizer(std::unique_ptr<SpmModel> model, std::string name, std::string version)
    : model_(std::move(model)), name_(std::move(name)), version_(std::move(version)) {}
Tokenizer::~Tokenizer() = default;

absl::Status Tokenizer::Encode(const std::string& text, int max_tokens, const std::string& where,
                               std::vector<int32_t>* ids) const {
  std::vector<int> out;
  std::string error;
  if (!model_->Encode(text, &out, &error)) {
    return DecodeError(DecodeFailure::kBadField, absl::StrCat(where, ": tokenizer ", name_, ": ", error));
  }
  if (max_tokens > 0 && static_cast<int>(out.size()) > max_tokens) out.resize(static_cast<size_t>(max_tokens));
  ids->assign(out.begin(), out.end());
  return absl::OkStatus();
}

int32_t Tokenizer::pad_id() const { return model_->pad_id() >= 0 ? model_->pad_id() : 0; }

absl::StatusOr<std::shared_ptr<const Tokenizer>> TokenizerCache::Get(const std::string& name) {
  absl::StatusOr<std::filesystem::path> path = ResolveUnderRoot(data_root_, name, "tokenizer", /*directory=*/false);
  if (!path.ok()) return path.status();
  struct stat st;
  if (stat(path->c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("tokenizer '", name, "' cannot be read"));
  const int64_t mtime = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(path->string());
    if (it != models_.end() && it->second.mtime_ns == mtime && it->second.size == st.st_size) {
      it->second.last_used = ++clock_;
      return it->second.tokenizer;
    }
  }
  std::string error;
  std::unique_ptr<SpmModel> model = SpmModel::Load(path->string(), &error);
  if (model == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer '", name, "' is not a SentencePiece model: ", error));
  }
  auto tokenizer = std::make_shared<const Tokenizer>(std::move(model), name,
                                                     absl::StrCat(path->string(), "@", st.st_size, "@", mtime));
  absl::MutexLock lock(&mu_);
  models_[path->string()] = {tokenizer, mtime, static_cast<int64_t>(st.st_size), ++clock_};
  while (models_.size() > 16) {
    auto oldest = models_.begin();
    for (auto it = models_.begin(); it != models_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    models_.erase(oldest);  // sessions holding it keep theirs
  }
  return tokenizer;
}

}  // namespace stoker
