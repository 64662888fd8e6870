#include "dataplane/sessions/session_caches.h"

#include <iterator>
#include <utility>

#include "glog/logging.h"

namespace stoker {

SessionCaches::SessionCaches(MemoryBudget* budget, int64_t max_bytes, std::string what)
    : budget_(budget), max_bytes_(max_bytes), what_(std::move(what)) {}

SessionCaches::~SessionCaches() {
  absl::MutexLock lock(&mu_);
  if (bytes_ > 0) budget_->Release(bytes_);
}

std::shared_ptr<const std::string> SessionCaches::FindBatch(int64_t samples) const {
  absl::MutexLock lock(&mu_);
  return batch_samples_ == samples ? batch_ : nullptr;
}

void SessionCaches::KeepBatch(std::shared_ptr<const std::string> data, int64_t samples) {
  absl::MutexLock lock(&mu_);
  if (batch_samples_ != 0) return;
  batch_ = std::move(data);
  batch_samples_ = samples;
}

std::shared_ptr<const std::string> SessionCaches::FindRaw(int64_t index) const {
  absl::MutexLock lock(&mu_);
  const auto* hit = FindLocked(raw_, index);
  return hit != nullptr ? *hit : nullptr;
}

void SessionCaches::KeepRaw(int64_t index, std::shared_ptr<const std::string> bytes) {
  const int64_t size = static_cast<int64_t>(bytes->size());
  absl::MutexLock lock(&mu_);
  KeepLocked(raw_, index, std::move(bytes), size);
}

cv::Mat SessionCaches::FindDecoded(int64_t index) const {
  absl::MutexLock lock(&mu_);
  const cv::Mat* hit = FindLocked(decoded_, index);
  return hit != nullptr ? *hit : cv::Mat();
}

void SessionCaches::KeepDecoded(int64_t index, const cv::Mat& image) {
  absl::MutexLock lock(&mu_);
  KeepLocked(decoded_, index, image, static_cast<int64_t>(image.total() * image.elemSize()));
}

// Its own slot, or once the cache is full, one of the filled slots; null
// when the sample must be produced.
template <typename T>
const T* SessionCaches::FindLocked(const std::map<int64_t, T>& cache, int64_t index) const {
  auto it = cache.find(index % kSlots);
  if (it != cache.end()) return &it->second;
  if (!full_ || cache.empty()) return nullptr;
  return &std::next(cache.begin(), static_cast<std::ptrdiff_t>(index % static_cast<int64_t>(cache.size())))->second;
}

// Keeps `value` (of `bytes`) in `index`'s slot if the session's limit and the
// server's budget allow; otherwise marks the cache full.
template <typename T>
void SessionCaches::KeepLocked(std::map<int64_t, T>& cache, int64_t index, T value, int64_t bytes) {
  if (full_ || cache.count(index % kSlots) > 0) return;
  if (bytes_ + bytes > max_bytes_ || !budget_->TryAcquire(bytes)) {
    full_ = true;
    LOG(WARNING) << what_ << " holds " << cache.size() << " of " << kSlots << " slots in " << bytes_
                 << " bytes; the next entry (" << bytes << " bytes) would pass --max-cache-bytes-per-session ("
                 << max_bytes_ << ") or the server's in-flight budget, so later samples reuse the filled slots";
    return;
  }
  cache.emplace(index % kSlots, std::move(value));
  bytes_ += bytes;
}

}  // namespace stoker
