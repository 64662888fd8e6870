// The strategies stoker-profile weighs (where to split a pipeline between
// offline materialisation and online work, and how to store the split's
// output) and how one is chosen: the Pareto front over the three costs, and a
// recommendation from weights, each metric normalised to 0..1 over the
// strategies (as the Presto study does). Pure functions on value types;
// thread-compatible.
#ifndef STOKER_MATERIALIZE_STRATEGY_H_
#define STOKER_MATERIALIZE_STRATEGY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dataplane/sample/stored_sample.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct Strategy {
  std::string name;            // "source", "decoded raw", "resize(256) raw+lz4"
  bool materialised = false;   // false: the source as it is, every op online
  std::vector<v1::Op> prefix;  // ops run offline; empty: decoded pixels
  StoredFormat format;

  // Measured by Profile (or given by a test), for the whole dataset:
  double offline_seconds = 0;           // to materialise it (0 for the source)
  double storage_bytes = 0;             // what it occupies
  double images_per_worker_second = 0;  // online, per server worker core
  double stored_bytes_per_sample = 0;   // what a server reads per sample
  double wire_bytes_per_sample = 0;     // what a server sends per sample

  // Set by MarkParetoFront and Recommend:
  bool pareto = false;
  double score = 0;  // 0..1, weighted
};

// How much each cost counts. Only the ratios matter.
struct Weights {
  double preprocessing = 0;  // offline seconds
  double storage = 0;        // bytes stored
  double throughput = 1;     // online images per worker-second
};

// "P,S,T": three non-negative numbers, not all zero. INVALID_ARGUMENT names
// the text and the form expected.
absl::StatusOr<Weights> ParseWeights(absl::string_view text);
std::string WeightsText(const Weights& w);

// How many leading ops of `pipeline` are deterministic (resize, center_crop,
// and a normalize after them, which is the last op) and so may run offline;
// the first random op ends the prefix.
size_t DeterministicPrefixLength(const std::vector<v1::Op>& pipeline);

// The source, then for every split point (decoded pixels, after the first
// deterministic op, after the second...) every format in `formats` (after a
// normalize, only the raw ones: float32 pixels are stored raw).
std::vector<Strategy> EnumerateStrategies(const std::vector<v1::Op>& pipeline,
                                          const std::vector<StoredFormat>& formats);

// Marks the strategies that no other beats on every cost at once (offline
// seconds and storage lower, throughput higher, at least one strictly).
void MarkParetoFront(std::vector<Strategy>& strategies);

// Scores each strategy (the weighted mean of its normalised metrics, 1 the
// best on each) and returns the index of the highest; ties go to the higher
// throughput, then the smaller storage, then the earlier. Needs one strategy.
size_t Recommend(std::vector<Strategy>& strategies, const Weights& weights);

}  // namespace stoker

#endif  // STOKER_MATERIALIZE_STRATEGY_H_
