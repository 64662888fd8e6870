// A fixed set of threads that run queued tasks in FIFO order. Decoding and
// augmentation run here, never on gRPC threads. Thread-safe. The destructor
// runs the tasks still queued, then joins the threads.
#ifndef STOKER_DATAPLANE_WORKER_POOL_H_
#define STOKER_DATAPLANE_WORKER_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class WorkerPool {
 public:
  explicit WorkerPool(int num_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Schedule(std::function<void()> task);
  int num_threads() const { return static_cast<int>(threads_.size()); }
  // Tasks waiting for a thread (not counting running ones).
  int QueueDepth() const;

 private:
  void Run();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // constant after construction
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_WORKER_POOL_H_
