#include "dataplane/base/worker_pool.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stoker {
namespace {

// The default share's name (tasks scheduled without a share).
constexpr char kDefaultShare[] = "";
// Weight given to a recent task's cost in the running mean.
constexpr double kCostSmoothing = 0.2;

}  // namespace

WorkerPool::WorkerPool(int num_threads, TaskObserver observer) : observer_(std::move(observer)) {
  {
    absl::MutexLock lock(&mu_);
    shares_[kDefaultShare].members = 1;  // never erased
  }
  for (int i = 0; i < std::max(1, num_threads); ++i) threads_.emplace_back([this] { Run(); });
}

WorkerPool::~WorkerPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

WorkerPool::Share::~Share() { pool_->Leave(name_); }

std::unique_ptr<WorkerPool::Share> WorkerPool::Join(const std::string& name, double weight) {
  absl::MutexLock lock(&mu_);
  ShareState& s = shares_[name];
  ++s.members;
  if (weight > 0) s.weight = weight;
  // A newcomer's first tasks are charged the pool's recent mean, not
  // nothing, so that the workers do not all pick it at once.
  if (s.mean_cost == 0) s.mean_cost = pool_mean_cost_;
  return std::unique_ptr<Share>(new Share(this, name));
}

void WorkerPool::Leave(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = shares_.find(name);
  if (it == shares_.end()) return;
  --it->second.members;
  MaybeEraseLocked(it);
}

void WorkerPool::MaybeEraseLocked(std::map<std::string, ShareState>::iterator it) {
  const ShareState& s = it->second;
  if (s.members <= 0 && s.running == 0 && s.queue.empty()) shares_.erase(it);
}

void WorkerPool::ActivateLocked(ShareState& share) {
  double busy_min = std::numeric_limits<double>::infinity();
  for (const auto& [name, s] : shares_) {
    if (&s != &share && (s.running > 0 || !s.queue.empty())) busy_min = std::min(busy_min, s.vtime);
  }
  share.vtime = std::max(share.vtime, std::isinf(busy_min) ? last_vtime_ : busy_min);
}

void WorkerPool::Schedule(const Share* share, std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  ShareState& s = shares_[share ? share->name() : kDefaultShare];
  if (s.queue.empty() && s.running == 0) ActivateLocked(s);
  s.queue.push_back(std::move(task));
  ++queued_;
}

int WorkerPool::QueueDepth() const {
  absl::MutexLock lock(&mu_);
  return queued_;
}

std::map<std::string, double> WorkerPool::WorkerSeconds() const {
  absl::MutexLock lock(&mu_);
  std::map<std::string, double> out;
  for (const auto& [name, s] : shares_) out[name] = s.worker_seconds;
  return out;
}

std::map<std::string, WorkerPool::ShareState>::iterator WorkerPool::PickLocked() {
  auto best = shares_.end();
  for (auto it = shares_.begin(); it != shares_.end(); ++it) {
    if (it->second.queue.empty()) continue;
    if (best == shares_.end() || it->second.vtime < best->second.vtime) best = it;
  }
  return best;
}

void WorkerPool::Run() {
  for (;;) {
    std::function<void()> task;
    std::string name;
    double charged = 0;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || queued_ > 0; };
      mu_.Await(absl::Condition(&ready));
      if (queued_ == 0) return;  // stopping and drained
      auto it = PickLocked();
      ShareState& s = it->second;
      task = std::move(s.queue.front());
      s.queue.pop_front();
      --queued_;
      ++s.running;
      last_vtime_ = s.vtime;
      charged = s.mean_cost;
      s.vtime += charged / s.weight;
      name = it->first;
    }
    const absl::Time start = absl::Now();
    task();
    const absl::Duration worked = absl::Now() - start;
    task = nullptr;  // whatever it captured goes before the share may
    const double seconds = absl::ToDoubleSeconds(worked);
    {
      absl::MutexLock lock(&mu_);
      auto it = shares_.find(name);
      ShareState& s = it->second;
      --s.running;
      s.vtime += (seconds - charged) / s.weight;
      s.mean_cost = s.mean_cost == 0 ? seconds : (1 - kCostSmoothing) * s.mean_cost + kCostSmoothing * seconds;
      pool_mean_cost_ = (1 - kCostSmoothing) * pool_mean_cost_ + kCostSmoothing * seconds;
      s.worker_seconds += seconds;
      MaybeEraseLocked(it);
    }
    if (observer_) observer_(name, worked);
  }
}

}  // namespace stoker
