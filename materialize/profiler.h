// stoker-profile's engine: measures every strategy (strategy.h) of a
// pipeline on an evenly spaced sample of a dataset. Offline, it materialises
// the sample with each strategy (the materialiser's own code, on local
// threads) and extrapolates the time and storage to the whole dataset;
// online, it serves each strategy from a real data server (one started in
// this process on 127.0.0.1, or the pool given) to a real client, and measures
// images per second of the server's worker time and the bytes read and sent
// per sample. Rounds are interleaved over the strategies, and the median
// counts, so that a machine whose speed drifts treats all alike.
// Profile() is thread-safe for distinct work directories.
#ifndef STOKER_MATERIALIZE_PROFILER_H_
#define STOKER_MATERIALIZE_PROFILER_H_

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dataplane/sample/stored_sample.h"
#include "materialize/strategy.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct ProfileConfig {
  std::filesystem::path data_root = ".";
  std::string dataset;                // under data_root (not a materialised one)
  std::vector<v1::Op> pipeline;       // the training job's whole pipeline
  int64_t sample = 500;               // samples profiled (evenly spaced); 0: all
  std::vector<StoredFormat> formats;  // tried at every split point
  // Data servers to measure with (host:port); they must serve data_root
  // under the same path (a shared filesystem). Empty: one server started in
  // this process on 127.0.0.1 with `server_workers` worker threads.
  std::vector<std::string> servers;
  int server_workers = 1;
  int offline_workers = 1;  // threads materialising the sample
  int batch_size = 32;
  int rounds = 3;  // online measurements per strategy (after one warm-up)
  // Where the sample's materialisations go: must lie under data_root so
  // that the servers can open them. Empty: data_root/.stoker-profile-PID.
  // Removed at the end unless `keep`.
  std::filesystem::path work_dir;
  bool keep = false;
  int64_t max_pixels = 100'000'000;
  int64_t max_file_bytes = int64_t{256} << 20;
  const std::atomic<bool>* cancel = nullptr;  // turns true: stop (CANCELLED)
};

struct ProfileResult {
  std::string dataset;
  std::string pipeline;  // as text
  int64_t dataset_samples = 0;
  int64_t sample = 0;      // profiled
  int server_workers = 0;  // of the in-process server; 0 with a given pool
  int offline_workers = 0;
  int rounds = 0;
  int batch_size = 0;
  std::vector<Strategy> strategies;  // measured, Pareto front marked
};

struct ProfileProgress {
  int64_t done = 0, total = 0;  // steps: one materialisation or one online measurement
  std::string step;             // what is under way, e.g. "online 2/3: resize(256) raw"
  double steps_per_second = 0;
  absl::Duration eta = absl::InfiniteDuration();
};
using ProfileProgressFn = std::function<void(const ProfileProgress&)>;

// INVALID_ARGUMENT for a bad configuration (named); the materialiser's and
// the servers' errors otherwise. `progress` (may be empty) is called on the
// calling thread after each step.
absl::StatusOr<ProfileResult> Profile(const ProfileConfig& config, const ProfileProgressFn& progress = {});

}  // namespace stoker

#endif  // STOKER_MATERIALIZE_PROFILER_H_
