#include "dataplane/sessions/batch_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace stoker {

BatchCache::BatchCache(int64_t max_bytes, ServerMetrics* metrics) : max_bytes_(max_bytes), metrics_(metrics) {}

std::string BatchCache::SessionKey(const v1::SessionConfig& config, const std::string& fingerprint) {
  // The fields that decide the bytes; job, weight and the expected
  // fingerprint (the dataset's own is used) do not.
  v1::SessionConfig k;
  k.set_dataset(config.dataset());
  *k.mutable_pipeline() = config.pipeline();
  k.set_batch_size(config.batch_size());  // SKIP replacements follow the epoch's order
  k.set_dtype(config.dtype());
  k.set_layout(config.layout());
  k.set_seed(config.seed());
  k.set_cache_mode(config.cache_mode());
  k.set_bad_sample_policy(config.bad_sample_policy());
  k.set_sequential(config.sequential());
  k.set_shuffle(config.shuffle());  // SKIP replacements follow the order too
  k.set_shard_window(config.shard_window());
  *k.mutable_store() = config.store();
  *k.mutable_fields() = config.fields();
  k.set_max_field_bytes(config.max_field_bytes());
  k.set_annotations(config.annotations());
  k.set_box_min_visibility(config.box_min_visibility());
  k.set_tokenizer(config.tokenizer());
  k.set_max_tokens(config.max_tokens());
  std::string key = absl::StrCat(fingerprint, "|");
  k.AppendToString(&key);  // deterministic for one binary: no maps in SessionConfig
  return key;
}

std::string BatchCache::BatchKey(const std::string& session_key, const v1::BatchRequest& request) {
  std::string key = absl::StrCat(session_key, "|", request.epoch(), "|", request.batch_index(), "|");
  for (int64_t i : request.sample_indices()) absl::StrAppend(&key, i, ",");
  return key;
}

BatchCache::Outcome BatchCache::Lookup(const std::string& key, FinishedBatch* hit, Waiter waiter) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    *hit = it->second.batch;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    if (metrics_) metrics_->BatchCache("hit").Increment();
    return Outcome::kHit;
  }
  auto making = making_.find(key);
  if (making != making_.end()) {
    making->second.push_back(std::move(waiter));
    if (metrics_) metrics_->BatchCache("joined").Increment();
    return Outcome::kJoined;
  }
  making_[key];
  if (metrics_) metrics_->BatchCache("miss").Increment();
  return Outcome::kMake;
}

void BatchCache::Finish(const std::string& key, const FinishedBatch* batch) {
  std::vector<Waiter> waiters;
  Waiter next_maker;
  {
    absl::MutexLock lock(&mu_);
    auto making = making_.find(key);
    if (batch == nullptr && making != making_.end() && !making->second.empty()) {
      // The maker gave up: the first waiter becomes the maker (and calls
      // Finish in turn); the others keep waiting for it, so the batch is
      // still made once.
      next_maker = std::move(making->second.front());
      making->second.erase(making->second.begin());
    } else if (making != making_.end()) {
      waiters = std::move(making->second);
      making_.erase(making);
    }
    const int64_t bytes = batch && batch->data ? static_cast<int64_t>(batch->data->size()) : 0;
    if (batch && batch->status.ok() && batch->data && bytes <= max_bytes_ && !entries_.count(key)) {
      EvictLocked(bytes);
      lru_.push_front(key);
      entries_[key] = Entry{*batch, bytes, lru_.begin()};
      bytes_ += bytes;
      if (metrics_) metrics_->batch_cache_bytes->Set(static_cast<double>(bytes_));
    }
  }
  if (next_maker) return next_maker(nullptr);
  for (Waiter& w : waiters) w(batch);
}

void BatchCache::EvictLocked(int64_t needed) {
  while (!lru_.empty() && bytes_ + needed > max_bytes_) {
    auto it = entries_.find(lru_.back());
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    lru_.pop_back();
    if (metrics_) metrics_->BatchCache("evicted").Increment();
  }
  if (metrics_) metrics_->batch_cache_bytes->Set(static_cast<double>(bytes_));
}

int64_t BatchCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace stoker
