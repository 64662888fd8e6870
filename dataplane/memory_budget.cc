#include "dataplane/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "glog/logging.h"

namespace stoker {

MemoryBudget::MemoryBudget(int64_t limit_bytes) : limit_(limit_bytes > 0 ? limit_bytes : DefaultLimit()) {}

namespace {

// A limit file's value; 0 for "max", a v1 "unlimited" (a huge number), or
// anything unreadable.
int64_t ReadLimit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    const long long limit = std::stoll(text);
    return limit > 0 && limit < (int64_t{1} << 60) ? limit : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

int64_t MemoryBudget::CgroupLimit(const std::string& proc_self_cgroup, const std::string& cgroup_fs) {
  // Lines "0::/path" (v2) or "N:memory:/path" (v1, possibly with more
  // controllers in the middle field).
  std::ifstream in(proc_self_cgroup);
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {
      if (const int64_t limit = ReadLimit(cgroup_fs + path + "/memory.max"); limit > 0) return limit;
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      if (const int64_t limit = ReadLimit(cgroup_fs + "/memory" + path + "/memory.limit_in_bytes"); limit > 0) {
        return limit;
      }
    }
  }
  return 0;
}

int64_t MemoryBudget::DefaultLimit(const std::string& proc_self_cgroup, const std::string& cgroup_fs) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t memory = pages > 0 && page > 0 ? int64_t{pages} * page : int64_t{8} << 30;
  if (const int64_t cgroup = CgroupLimit(proc_self_cgroup, cgroup_fs); cgroup > 0) memory = std::min(memory, cgroup);
  return memory / 2;
}

bool MemoryBudget::TryAcquire(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (bytes > limit_ - used_) return false;
  used_ += bytes;
  return true;
}

void MemoryBudget::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_ -= bytes;
  LOG_IF(DFATAL, used_ < 0) << "memory budget released more than it took";
}

int64_t MemoryBudget::used() {
  absl::MutexLock lock(&mu_);
  return used_;
}

}  // namespace stoker
