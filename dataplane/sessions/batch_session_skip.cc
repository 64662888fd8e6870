// BatchSession under bad_sample_policy SKIP: a sample that fails is
// replaced by the next decodable one after it in the epoch's order, the
// same on every server.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/epoch_plan.h"
#include "dataplane/sessions/batch_session.h"
#include "dataplane/sessions/batch_session_internal.h"

namespace stoker {

using batch_session_internal::FailsTheBatch;

std::shared_ptr<const std::vector<int64_t>> BatchSession::EpochPositions(int64_t epoch, std::vector<int64_t>* order) {
  {
    absl::MutexLock lock(&mu_);
    if (order_epoch_ == epoch) {
      *order = *order_;
      return positions_;
    }
  }
  // The session's order for one rank (SKIP replacements follow it). The same
  // on every server; a client of several ranks interleaves the lanes in
  // blocks of batch x world size instead, so a replacement may come from
  // another window than its batch's (an extra shard read, never a
  // difference between servers).
  std::optional<ShardLayout> shards;
  if (config_.shuffle() == v1::SHUFFLE_SHARDS) shards = MakeShardLayout(source_->ShardSizes(), config_.shard_window());
  EpochPlan plan(config_.seed(), epoch, source_->size(), config_.batch_size(), /*drop_last=*/false, 0, 1,
                 /*shuffle=*/!config_.sequential(), shards ? &*shards : nullptr);
  auto positions = std::make_shared<std::vector<int64_t>>(plan.order().size());
  for (size_t p = 0; p < plan.order().size(); ++p) (*positions)[plan.order()[p]] = static_cast<int64_t>(p);
  *order = plan.order();
  absl::MutexLock lock(&mu_);
  order_epoch_ = epoch;
  order_ = std::make_shared<const std::vector<int64_t>>(plan.order());
  positions_ = positions;
  return positions;
}

absl::Status BatchSession::Replace(int64_t epoch, int64_t index, uint8_t* dst, std::vector<std::string>* fields,
                                   Job& job, int64_t* replacement) {
  // Load-bearing: the same rule on every server gives the same batch.
  constexpr int64_t kMaxTries = 64;
  std::vector<int64_t> order;
  auto positions = EpochPositions(epoch, &order);
  const int64_t n = static_cast<int64_t>(order.size());
  const int64_t start = (*positions)[index];
  for (int64_t k = 1; k <= std::min(kMaxTries, n - 1); ++k) {
    const int64_t candidate = order[(start + k) % n];
    const absl::Status s = ProduceSample(epoch, candidate, dst, fields, job);
    if (s.ok()) {
      *replacement = candidate;
      return absl::OkStatus();
    }
    // A timer or a stop is no verdict on the candidate: the batch fails instead.
    if (FailsTheBatch(s) || cancelled_.load() || job.abandoned.load()) return s;
  }
  return absl::DataLossError(
      absl::StrCat("no decodable sample among the ", std::min(kMaxTries, n - 1), " after it in the epoch's order"));
}

}  // namespace stoker
