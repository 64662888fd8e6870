#include "dataplane/sessions/memory_budget.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "glog/logging.h"

namespace stoker {

namespace {

int64_t ChosenLimit(int64_t limit_bytes) {
  if (limit_bytes > 0) return limit_bytes;
  std::string which;
  const int64_t limit = MemoryBudget::DefaultLimit(MemoryBudget::ProcessLimits::Read(), &which);
  LOG(INFO) << "batches in flight may hold " << limit << " bytes (--max-inflight-bytes 0: half of " << which << ")";
  return limit;
}

}  // namespace

MemoryBudget::MemoryBudget(int64_t limit_bytes) : limit_(ChosenLimit(limit_bytes)) {}

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

namespace {

// A "Key:   N kB" line of /proc/self/status, in bytes; 0 when missing.
int64_t StatusBytes(const std::string& proc_self_status, const std::string& key) {
  std::ifstream in(proc_self_status);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) != 0) continue;
    try {
      return std::stoll(line.substr(key.size() + 1)) * 1024;
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

int64_t SoftLimit(int resource) {
  rlimit r{};
  if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<int64_t>(std::min<rlim_t>(r.rlim_cur, rlim_t{1} << 62));
}

}  // namespace

MemoryBudget::ProcessLimits MemoryBudget::ProcessLimits::Read(const std::string& proc_self_cgroup,
                                                              const std::string& cgroup_fs,
                                                              const std::string& proc_self_status) {
  ProcessLimits l;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  l.physical = pages > 0 && page > 0 ? int64_t{pages} * page : int64_t{8} << 30;
  l.cgroup = CgroupLimit(proc_self_cgroup, cgroup_fs);
  l.address_space = SoftLimit(RLIMIT_AS);
  l.data = SoftLimit(RLIMIT_DATA);
  if (l.address_space > 0) l.address_space_used = StatusBytes(proc_self_status, "VmSize");
  if (l.data > 0) l.data_used = StatusBytes(proc_self_status, "VmData");
  return l;
}

int64_t MemoryBudget::DefaultLimit(const ProcessLimits& limits, std::string* which) {
  int64_t room = limits.physical > 0 ? limits.physical : int64_t{8} << 30;
  std::string name = "the machine's memory";
  auto consider = [&](int64_t limit, int64_t used, const char* what) {
    if (limit <= 0) return;
    const int64_t left = std::max<int64_t>(0, limit - used);
    if (left < room) {
      room = left;
      name = what;
    }
  };
  consider(limits.cgroup, 0, "the cgroup's memory limit");
  consider(limits.address_space, limits.address_space_used, "what RLIMIT_AS leaves");
  consider(limits.data, limits.data_used, "what RLIMIT_DATA leaves");
  if (which) *which = name;
  return std::max<int64_t>(1, room / 2);
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
