// A server-wide budget of bytes for batches in flight: counted from the
// moment a request is accepted until the batch's last chunk is written (or
// the batch is dropped). Requests past the budget are refused, not queued, so
// one client cannot make the server hold more than the operator allowed.
// Thread-safe.
#ifndef STOKER_DATAPLANE_SESSIONS_MEMORY_BUDGET_H_
#define STOKER_DATAPLANE_SESSIONS_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class MemoryBudget {
 public:
  // `limit_bytes` <= 0: DefaultLimit().
  explicit MemoryBudget(int64_t limit_bytes);

  // What bounds the memory this process may use.
  struct ProcessLimits {
    int64_t physical = 0;            // the machine's memory
    int64_t cgroup = 0;              // its cgroup's limit (CgroupLimit); 0: none
    int64_t address_space = 0;       // RLIMIT_AS (soft); 0: unlimited
    int64_t address_space_used = 0;  // VmSize now
    int64_t data = 0;                // RLIMIT_DATA (soft); 0: unlimited
    int64_t data_used = 0;           // VmData now
    // This process's, from sysconf, getrlimit and `proc_self_status`.
    static ProcessLimits Read(const std::string& proc_self_cgroup = "/proc/self/cgroup",
                              const std::string& cgroup_fs = "/sys/fs/cgroup",
                              const std::string& proc_self_status = "/proc/self/status");
  };
  // Half the room the tightest limit leaves: the machine's memory, its
  // cgroup's limit (a container's memory limit, a systemd unit's MemoryMax:
  // the kernel enforces it by killing), and what RLIMIT_AS and RLIMIT_DATA
  // leave beyond what the process already maps (past them an allocation
  // fails). *which (nullable) names the limit that decided.
  static int64_t DefaultLimit(const ProcessLimits& limits, std::string* which = nullptr);
  static int64_t DefaultLimit() { return DefaultLimit(ProcessLimits::Read()); }
  // The memory limit of the cgroup that `proc_self_cgroup` names, read from
  // the cgroup file system at `cgroup_fs` (v2 memory.max, or v1
  // memory.limit_in_bytes); 0 when there is none.
  static int64_t CgroupLimit(const std::string& proc_self_cgroup, const std::string& cgroup_fs);

  // Takes `bytes` if they fit; false (and nothing taken) otherwise.
  bool TryAcquire(int64_t bytes);
  void Release(int64_t bytes);

  int64_t limit() const { return limit_; }
  int64_t used();

 private:
  const int64_t limit_;
  absl::Mutex mu_;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stoker

#endif  // STOKER_DATAPLANE_SESSIONS_MEMORY_BUDGET_H_
