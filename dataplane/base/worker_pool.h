// A fixed set of threads that run queued tasks. Decoding and augmentation run
// here, never on gRPC threads. Thread-safe. The destructor runs the tasks
// still queued, then joins the threads.
//
// Tasks belong to shares (a training job's sessions join its share by name).
// Worker time is divided between the shares that have work by weighted fair
// sharing: each share carries a virtual time, its measured worker time over
// its weight, and the next task comes from the share with work whose virtual
// time is lowest (tasks within a share run in FIFO order). So two jobs of
// weight 1 get half the workers' time each whatever one task of each costs,
// and weights 3:1 split it 75/25. A task's cost is charged as an estimate
// (the share's recent mean) when it starts and corrected when it ends, so
// that several workers do not all pick the same share before its first
// charge lands. A share that was idle re-enters at the lowest virtual time of
// the busy ones: idling earns no credit.
#ifndef STOKER_DATAPLANE_BASE_WORKER_POOL_H_
#define STOKER_DATAPLANE_BASE_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stoker {

class WorkerPool {
 public:
  // Called after every task with its share's name and its wall time on the
  // worker (for per-job metrics). Runs on the worker thread, no lock held.
  using TaskObserver = std::function<void(const std::string& share, absl::Duration worked)>;

  explicit WorkerPool(int num_threads, TaskObserver observer = nullptr);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Membership of a share; the share lives while any membership does (or it
  // has tasks queued or running).
  class Share {
   public:
    ~Share();
    Share(const Share&) = delete;
    Share& operator=(const Share&) = delete;
    const std::string& name() const { return name_; }

   private:
    friend class WorkerPool;
    Share(WorkerPool* pool, std::string name) : pool_(pool), name_(std::move(name)) {}
    WorkerPool* const pool_;
    const std::string name_;
  };
  // Joins (or creates) the share `name`; `weight` > 0 becomes the share's
  // weight (the latest join sets it). Callers bound weights (the server takes
  // 0.01 up to --max-job-weight).
  std::unique_ptr<Share> Join(const std::string& name, double weight);

  // A task of `share` (null: the pool's default share, weight 1).
  void Schedule(const Share* share, std::function<void()> task);
  void Schedule(std::function<void()> task) { Schedule(nullptr, std::move(task)); }

  int num_threads() const { return static_cast<int>(threads_.size()); }
  // Tasks waiting for a thread (not counting running ones).
  int QueueDepth() const;
  // Worker seconds each share has used so far (shares still alive).
  std::map<std::string, double> WorkerSeconds() const;

 private:
  struct ShareState {
    double weight = 1;
    int members = 0;
    int running = 0;
    std::deque<std::function<void()>> queue;
    double vtime = 0;           // worker seconds / weight, as charged so far
    double mean_cost = 0;       // recent seconds per task (the charge at start)
    double worker_seconds = 0;  // measured
  };
  void Run();
  void Leave(const std::string& name);
  // The share whose next task runs now (the lowest virtual time with work).
  std::map<std::string, ShareState>::iterator PickLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A share that had nothing queued or running gets work: it re-enters at
  // the lowest virtual time of the busy shares.
  void ActivateLocked(ShareState& share) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeEraseLocked(std::map<std::string, ShareState>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const TaskObserver observer_;
  mutable absl::Mutex mu_;
  std::map<std::string, ShareState> shares_ ABSL_GUARDED_BY(mu_);
  int queued_ ABSL_GUARDED_BY(mu_) = 0;
  double last_vtime_ ABSL_GUARDED_BY(mu_) = 0;      // the virtual time of the last task started
  double pool_mean_cost_ ABSL_GUARDED_BY(mu_) = 0;  // recent seconds per task over all shares
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // constant after construction
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_BASE_WORKER_POOL_H_
