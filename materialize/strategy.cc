#include "materialize/strategy.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dataplane/ops/op_registry.h"
#include "dataplane/ops/pipeline_text.h"

namespace stoker {
namespace {

// Where x lies between the lowest and highest of `values`: 0..1 (0 when all are equal).
double Normalised(double x, double lo, double hi) { return hi > lo ? (x - lo) / (hi - lo) : 0; }

template <typename Get>
void Range(const std::vector<Strategy>& s, Get get, double* lo, double* hi) {
  *lo = *hi = get(s.front());
  for (const Strategy& x : s) {
    *lo = std::min(*lo, get(x));
    *hi = std::max(*hi, get(x));
  }
}

// a is at least as good as b on every cost, and better on one.
bool Dominates(const Strategy& a, const Strategy& b) {
  const bool no_worse = a.offline_seconds <= b.offline_seconds && a.storage_bytes <= b.storage_bytes &&
                        a.images_per_worker_second >= b.images_per_worker_second;
  const bool better = a.offline_seconds < b.offline_seconds || a.storage_bytes < b.storage_bytes ||
                      a.images_per_worker_second > b.images_per_worker_second;
  return no_worse && better;
}

}  // namespace

absl::StatusOr<Weights> ParseWeights(absl::string_view text) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ',');
  double v[3] = {0, 0, 0};
  bool ok = parts.size() == 3;
  for (size_t i = 0; ok && i < 3; ++i) {
    ok = absl::SimpleAtod(absl::StripAsciiWhitespace(parts[i]), &v[i]) && std::isfinite(v[i]) && v[i] >= 0;
  }
  if (!ok || v[0] + v[1] + v[2] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("--weights '", text,
                                                   "': expected preprocessing,storage,throughput as three "
                                                   "non-negative numbers, not all zero (e.g. 0,0,1)"));
  }
  return Weights{v[0], v[1], v[2]};
}

std::string WeightsText(const Weights& w) { return absl::StrCat(w.preprocessing, ",", w.storage, ",", w.throughput); }

size_t DeterministicPrefixLength(const std::vector<v1::Op>& pipeline) {
  size_t n = 0;
  auto storable = [](const v1::Op& op) {
    const OpEntry* entry = FindOp(op);  // op_entry.h: the ops a stored prefix may hold
    return entry != nullptr && entry->storable;
  };
  while (n < pipeline.size() && storable(pipeline[n])) ++n;
  if (n < pipeline.size() && MakesFloats(pipeline[n])) ++n;  // normalize, the last op: stored as float32 pixels
  return n;
}

std::vector<Strategy> EnumerateStrategies(const std::vector<v1::Op>& pipeline,
                                          const std::vector<StoredFormat>& formats) {
  std::vector<Strategy> out;
  Strategy source;
  source.name = "source";
  out.push_back(source);
  const size_t prefix = DeterministicPrefixLength(pipeline);
  for (size_t split = 0; split <= prefix; ++split) {
    std::vector<v1::Op> ops(pipeline.begin(), pipeline.begin() + static_cast<std::ptrdiff_t>(split));
    const std::string where = split == 0 ? "decoded" : PipelineToText(ops);
    const bool floats = split > 0 && MakesFloats(ops.back());
    for (const StoredFormat& format : formats) {
      if (floats && format.encoding != StoredEncoding::kRaw) continue;  // float32 pixels are stored raw only
      Strategy s;
      s.name = absl::StrCat(where, " ", format.Name());
      s.materialised = true;
      s.prefix = ops;
      s.format = format;
      out.push_back(std::move(s));
    }
  }
  return out;
}

void MarkParetoFront(std::vector<Strategy>& strategies) {
  for (Strategy& s : strategies) {
    s.pareto =
        std::none_of(strategies.begin(), strategies.end(), [&](const Strategy& other) { return Dominates(other, s); });
  }
}

size_t Recommend(std::vector<Strategy>& strategies, const Weights& weights) {
  double off_lo, off_hi, sto_lo, sto_hi, thr_lo, thr_hi;
  Range(
      strategies, [](const Strategy& s) { return s.offline_seconds; }, &off_lo, &off_hi);
  Range(
      strategies, [](const Strategy& s) { return s.storage_bytes; }, &sto_lo, &sto_hi);
  Range(
      strategies, [](const Strategy& s) { return s.images_per_worker_second; }, &thr_lo, &thr_hi);
  const double total = weights.preprocessing + weights.storage + weights.throughput;
  size_t best = 0;
  for (size_t i = 0; i < strategies.size(); ++i) {
    Strategy& s = strategies[i];
    s.score = (weights.preprocessing * (1 - Normalised(s.offline_seconds, off_lo, off_hi)) +
               weights.storage * (1 - Normalised(s.storage_bytes, sto_lo, sto_hi)) +
               weights.throughput * Normalised(s.images_per_worker_second, thr_lo, thr_hi)) /
              total;
    const Strategy& b = strategies[best];
    if (s.score > b.score || (s.score == b.score && (s.images_per_worker_second > b.images_per_worker_second ||
                                                     (s.images_per_worker_second == b.images_per_worker_second &&
                                                      s.storage_bytes < b.storage_bytes)))) {
      best = i;
    }
  }
  return best;
}

}  // namespace stoker
