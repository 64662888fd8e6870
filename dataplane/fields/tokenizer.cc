#include "dataplane/fields/tokenizer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>

#include "absl/strings/str_cat.h"
#include "dataplane/base/data_root.h"
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

namespace {

// A protobuf varint at bytes[*pos]; false when it runs past the end or 10 bytes.
bool ReadVarint(const std::string& bytes, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && *pos < bytes.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(bytes[(*pos)++]);
    *value |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

// The file's bytes, at most `limit` of them: INVALID_ARGUMENT past it (read
// as they come, so a file that grows after stat() cannot pass the limit).
absl::StatusOr<std::string> ReadBounded(const std::filesystem::path& path, const std::string& name, int64_t limit) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("tokenizer '", name, "' cannot be opened"));
  std::string bytes;
  char buffer[1 << 16];
  ssize_t got = 0;
  while ((got = read(fd, buffer, sizeof(buffer))) > 0) {
    if (static_cast<int64_t>(bytes.size()) + got > limit) {
      close(fd);
      return absl::InvalidArgumentError(absl::StrCat("tokenizer '", name, "' is larger than ", limit,
                                                     " bytes, the most a SentencePiece model file may have here"));
    }
    bytes.append(buffer, static_cast<size_t>(got));
  }
  close(fd);
  if (got < 0) return absl::DataLossError(absl::StrCat("tokenizer '", name, "': read error"));
  return bytes;
}

}  // namespace

absl::Status CheckSentencePieceModel(const std::string& bytes) {
  size_t pos = 0;
  int64_t pieces = 0;
  while (pos < bytes.size()) {
    const size_t at = pos;
    uint64_t key = 0, length = 0;
    if (!ReadVarint(bytes, &pos, &key)) {
      return absl::InvalidArgumentError(absl::StrCat("byte ", at, ": a field key that does not end"));
    }
    const uint64_t field = key >> 3, wire = key & 7;
    const bool known = field >= 1 && field <= 5;
    if (wire != 2 || !(known || field >= 200)) {
      return absl::InvalidArgumentError(
          absl::StrCat("byte ", at, ": field ", field, " of wire type ", wire,
                       " is not part of a SentencePiece model (ModelProto: length-delimited fields 1-5)"));
    }
    if (!ReadVarint(bytes, &pos, &length) || length > bytes.size() - pos) {
      return absl::InvalidArgumentError(absl::StrCat("byte ", at, ": field ", field, " runs past the end of the file"));
    }
    pos += static_cast<size_t>(length);
    if (field == 1) ++pieces;
  }
  if (pieces == 0) return absl::InvalidArgumentError("no pieces (an empty vocabulary)");
  return absl::OkStatus();
}

TokenizerCache::Result TokenizerCache::Load(const std::filesystem::path& path, const std::string& name,
                                            int64_t mtime_ns) const {
  try {
    absl::StatusOr<std::string> bytes = ReadBounded(path, name, max_model_bytes_);
    if (!bytes.ok()) return bytes.status();
    if (absl::Status s = CheckSentencePieceModel(*bytes); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer '", name, "' is not a SentencePiece model: ", s.message()));
    }
    loads_.fetch_add(1);
    std::string error;
    std::unique_ptr<SpmModel> model = SpmModel::Load(*bytes, &error);
    if (model == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer '", name, "' is not a SentencePiece model: ", error));
    }
    return std::make_shared<const Tokenizer>(std::move(model), name,
                                             absl::StrCat(path.string(), "@", bytes->size(), "@", mtime_ns));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("tokenizer '", name, "': out of memory while loading it"));
  } catch (const std::exception& e) {  // nothing else is expected; never a broken promise for the waiters
    return absl::InternalError(absl::StrCat("tokenizer '", name, "': ", e.what()));
  }
}

absl::StatusOr<std::shared_ptr<const Tokenizer>> TokenizerCache::Get(const std::string& name) {
  absl::StatusOr<std::filesystem::path> path = ResolveUnderRoot(data_root_, name, "tokenizer", /*directory=*/false);
  if (!path.ok()) return path.status();
  struct stat st;
  if (stat(path->c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("tokenizer '", name, "' cannot be read"));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(absl::StrCat("tokenizer '", name, "' is not a file"));
  if (st.st_size > max_model_bytes_) {  // before anything is read
    return absl::InvalidArgumentError(absl::StrCat("tokenizer '", name, "' has ", st.st_size,
                                                   " bytes; a SentencePiece "
                                                   "model file may have at most ",
                                                   max_model_bytes_, " here"));
  }
  const int64_t mtime = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  std::promise<Result> promise;
  std::shared_future<Result> pending;
  bool mine = false;  // this call loads; others with the file wait for it
  {
    absl::MutexLock lock(&mu_);
    auto it = models_.find(path->string());
    if (it != models_.end() && it->second.mtime_ns == mtime && it->second.size == st.st_size) {
      it->second.last_used = ++clock_;
      pending = it->second.result;
    } else {
      mine = true;
      pending = promise.get_future().share();
      models_[path->string()] = {pending, mtime, static_cast<int64_t>(st.st_size), ++clock_};
      while (models_.size() > 16) {
        auto oldest = models_.begin();
        for (auto i = models_.begin(); i != models_.end(); ++i) {
          if (i->second.last_used < oldest->second.last_used) oldest = i;
        }
        models_.erase(oldest);  // sessions holding it keep theirs; a load in flight ends for its callers
      }
    }
  }
  if (!mine) return pending.get();
  Result result = Load(*path, name, mtime);
  promise.set_value(result);
  return result;
}

}  // namespace stoker
