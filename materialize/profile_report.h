// How stoker-profile shows its results: a text table (the Pareto front
// marked, the recommendation named), JSON, and a self-contained HTML page
// with a throughput-versus-storage chart (inline SVG, nothing fetched) and
// the table. Pure functions; thread-safe.
#ifndef STOKER_MATERIALIZE_PROFILE_REPORT_H_
#define STOKER_MATERIALIZE_PROFILE_REPORT_H_

#include <cstddef>
#include <string>

#include "materialize/profiler.h"
#include "materialize/strategy.h"
#include "nlohmann/json.hpp"

namespace stoker {

// `recommended` indexes result.strategies, scored for `weights` (Recommend).
std::string ProfileTable(const ProfileResult& result, const Weights& weights, size_t recommended);
nlohmann::json ProfileJson(const ProfileResult& result, const Weights& weights, size_t recommended);
std::string ProfileHtml(const ProfileResult& result, const Weights& weights, size_t recommended);

// "1.50 GiB", "312.0 KiB", "12 B".
std::string HumanBytes(double bytes);

}  // namespace stoker

#endif  // STOKER_MATERIALIZE_PROFILE_REPORT_H_
