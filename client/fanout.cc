#include "client/fanout.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

namespace stoker {
namespace {

constexpr double kDecay = 0.2;  // weight of a new batch in the decaying averages

// FNV-1a over the key, a separator and the address, then SplitMix64's
// finaliser: fixed across processes and builds.
uint64_t Score(const std::string& key, const std::string& server) {
  uint64_t h = 1469598103934665603ULL;
  auto add = [&h](unsigned char c) {
    h ^= c;
    h *= 1099511628211ULL;
  };
  for (unsigned char c : key) add(c);
  add(0);
  for (unsigned char c : server) add(c);
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

void Blend(double* average, double value, bool first) {
  *average = first ? value : *average + kDecay * (value - *average);
}

}  // namespace

std::vector<std::string> RendezvousOrder(const std::string& key, const std::vector<std::string>& servers,
                                         const std::map<std::string, double>& weights) {
  double mean = 1;
  if (!weights.empty()) {
    double sum = 0;
    int n = 0;
    for (const auto& [s, w] : weights) {
      if (w > 0) {
        sum += w;
        ++n;
      }
    }
    if (n > 0) mean = sum / n;
  }
  std::vector<std::pair<double, std::string>> scored;
  scored.reserve(servers.size());
  for (const std::string& s : servers) {
    const uint64_t h = Score(key, s);
    if (weights.empty()) {
      scored.emplace_back(static_cast<double>(h), s);
      continue;
    }
    // -w / ln(u), u uniform in (0, 1): the highest score wins with
    // probability proportional to w.
    auto it = weights.find(s);
    const double w = it != weights.end() && it->second > 0 ? it->second : mean;
    const double u = (static_cast<double>(h >> 11) + 0.5) / static_cast<double>(uint64_t{1} << 53);
    scored.emplace_back(-w / std::log(u), s);
  }
  std::sort(scored.begin(), scored.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  std::vector<std::string> order;
  order.reserve(scored.size());
  for (auto& [score, s] : scored) order.push_back(std::move(s));
  return order;
}

Fanout::Fanout(FanoutOptions options)
    : options_(std::move(options)),
      target_(std::max(Floor(), std::min(options_.initial_servers, Cap()))),
      probe_backoff_(2 * options_.interval) {
  SetCapacities(options_.capacities);
  SetPrefetch();
}

int Fanout::Floor() const { return std::max(1, options_.min_servers); }

int Fanout::Cap() const { return options_.max_servers > 0 ? std::max(options_.max_servers, Floor()) : INT_MAX; }

void Fanout::SetCapacities(std::map<std::string, double> capacities) {
  weights_.clear();
  for (const auto& [s, c] : capacities) {
    if (c > 0) weights_[s] = std::sqrt(c);
  }
}

void Fanout::OnBatch(const std::string& server, absl::Duration latency, double queue_seconds, double server_seconds) {
  ServerStats& s = stats_[server];
  const bool first = s.batches == 0;
  Blend(&s.latency, absl::ToDoubleSeconds(latency), first);
  Blend(&s.queue, std::max(0.0, queue_seconds), first);
  Blend(&s.make, std::max(0.0, server_seconds - queue_seconds), first);
  ++s.batches;
}

bool Fanout::saturated(const std::string& server) const {
  auto it = stats_.find(server);
  return it != stats_.end() && it->second.batches >= 2 &&
         it->second.queue > std::max(kSaturatedQueue * it->second.make, absl::ToDoubleSeconds(kSaturatedFloor));
}

double Fanout::SupplyOf(const std::string& server) const {
  auto it = stats_.find(server);
  if (it == stats_.end() || it->second.batches == 0) return -1;
  return options_.window / std::max(it->second.latency, 1e-6);
}

const std::vector<std::string>& Fanout::Choose(const std::vector<std::string>& eligible, int at_least, absl::Time now) {
  eligible_ = static_cast<int>(eligible.size());
  for (auto it = avoid_.begin(); it != avoid_.end();) it = now >= it->second ? avoid_.erase(it) : std::next(it);
  const size_t want = static_cast<size_t>(std::max(target_, at_least));
  // Avoided servers come last: used only when the others are too few.
  std::vector<std::string> order = RendezvousOrder(options_.key, eligible, weights_);
  std::stable_partition(order.begin(), order.end(), [this](const std::string& s) { return !avoid_.count(s); });
  order.resize(std::min(order.size(), want));
  // Statistics of servers no longer chosen are dropped: a server that comes
  // back is measured afresh.
  for (auto it = stats_.begin(); it != stats_.end();) {
    it = std::find(order.begin(), order.end(), it->first) == order.end() ? stats_.erase(it) : std::next(it);
  }
  if (pending_ != Probe::kNone) {
    for (const std::string& s : order) {
      if (std::find(chosen_.begin(), chosen_.end(), s) == chosen_.end()) {  // the server the probe brought in
        probe_ = s;
        probe_since_ = now;
        probing_ = pending_;
        break;
      }
    }
    pending_ = Probe::kNone;
  }
  chosen_ = std::move(order);
  return chosen_;
}

void Fanout::OnWait(absl::Duration waited) { waited_ += waited; }

void Fanout::Evaluate(absl::Time now) {
  // The supply of the chosen servers, those not yet measured counted at the
  // mean of the others.
  double known = 0;
  int measured = 0;
  for (const std::string& s : chosen_) {
    if (const double r = SupplyOf(s); r >= 0) {
      known += r;
      ++measured;
    }
  }
  supply_ = measured > 0 ? known * static_cast<double>(chosen_.size()) / measured : 0;
  SetPrefetch();
  if (window_start_ == absl::InfinitePast()) window_start_ = now;
  if (now < next_change_ || now - window_start_ < options_.interval || pending_ != Probe::kNone) return;
  // The first interval with batches is the start (connecting, the first
  // requests' cold queue): its waits say nothing about the servers.
  if (!started_) {
    started_ = measured > 0;
    waited_ = absl::ZeroDuration();
    window_start_ = now;
    return;
  }
  // Starved: the training loop waited for batches more than kStarved of the
  // time since the last look.
  starved_ratio_ = absl::FDivDuration(waited_, now - window_start_);
  waited_ = absl::ZeroDuration();
  window_start_ = now;
  const double want = options_.headroom * demand_;
  // Short: the chosen servers cannot supply the demand with headroom. (The
  // starved ratio is kept for metrics: in a pool short of capacity every
  // rank is starved, and moving on that alone only churns.)
  const bool short_of_supply = demand_ > 0 && measured > 0 && supply_ < want;
  const bool starved = short_of_supply || starved_ratio_ > kStarved;
  if (!probe_.empty()) {
    auto it = stats_.find(probe_);
    const bool answered = it != stats_.end() && it->second.batches >= 2;
    const bool gone = std::find(chosen_.begin(), chosen_.end(), probe_) == chosen_.end();
    if (!answered && !gone && now - probe_since_ < 3 * options_.interval) return;  // not judged yet
    if (starved && (gone || saturated(probe_) || !answered)) {
      // No room there either: a grown target shrinks back, and the next
      // probe waits longer.
      if (probing_ == Probe::kGrow) target_ = std::max(Floor(), target_ - grown_by_);
      if (probing_ == Probe::kMove) avoid_.erase(moved_off_);  // nothing gained: back to the server it left
      ++probes_dropped_;
      next_probe_ = now + probe_backoff_;
      probe_backoff_ = std::min(2 * probe_backoff_, 64 * options_.interval);
    } else {
      probe_backoff_ = 2 * options_.interval;
    }
    probe_.clear();
    probing_ = Probe::kNone;
    next_change_ = now + options_.interval;
    return;
  }
  if (starved) {
    if (now < next_probe_ || measured == 0) return;
    // Off the most saturated chosen server, if one is; else one more server.
    std::string worst;
    double worst_ratio = 0;
    for (const std::string& s : chosen_) {
      if (!saturated(s)) continue;
      const ServerStats& st = stats_.at(s);
      const double ratio = st.queue / std::max(st.make, 1e-9);
      if (worst.empty() || ratio > worst_ratio) {
        worst = s;
        worst_ratio = ratio;
      }
    }
    if (!worst.empty() && eligible_ > static_cast<int>(chosen_.size())) {
      avoid_[worst] = now + 30 * options_.interval;
      moved_off_ = worst;
      pending_ = Probe::kMove;
    } else if (target_ < Cap() && target_ < eligible_) {
      // None saturated: the servers are too few, not too busy. At once, as
      // many in all as the measured supply per chosen server says the demand
      // needs (at least one more: a rank starved with supply enough on paper).
      const double per_server = supply_ / static_cast<double>(std::max<size_t>(1, chosen_.size()));
      const double need = per_server > 0 && std::isfinite(want / per_server) ? std::ceil(want / per_server) : 0;
      const int room = std::min(Cap(), eligible_) - target_;
      grown_by_ = std::clamp(static_cast<int>(std::min<double>(need, INT_MAX / 2)) - target_, 1, room);
      target_ += grown_by_;
      pending_ = Probe::kGrow;
    } else {
      return;
    }
    next_change_ = now + options_.interval;
    return;
  }
  // Oversupplied: the others would still cover the demand with room.
  if (demand_ > 0 && target_ > Floor() && static_cast<int>(chosen_.size()) >= target_ &&
      measured == static_cast<int>(chosen_.size())) {
    double weakest = supply_;
    for (const std::string& s : chosen_) weakest = std::min(weakest, SupplyOf(s));
    if (supply_ - weakest >= 1.5 * want) {
      --target_;
      next_change_ = now + options_.interval;
    }
  }
}

void Fanout::SetPrefetch() {
  if (options_.fixed_prefetch > 0) {
    prefetch_ = options_.fixed_prefetch;
    return;
  }
  const int64_t cap = options_.prefetch_bytes > 0 && options_.batch_bytes > 0
                          ? std::max<int64_t>(2, options_.prefetch_bytes / options_.batch_bytes)
                          : INT_MAX;
  const int servers = std::max<int>(1, chosen_.empty() ? target_ : static_cast<int>(chosen_.size()));
  double latency = 0;
  int measured = 0;
  for (const std::string& s : chosen_) {
    auto it = stats_.find(s);
    if (it == stats_.end() || it->second.batches == 0) continue;
    latency += it->second.latency;
    ++measured;
  }
  int64_t depth = int64_t{2} * options_.window * servers;  // before a demand and a latency are known
  if (demand_ > 0 && measured > 0) {
    const double rate = supply_ > 0 ? std::min(demand_, supply_) : demand_;
    depth = static_cast<int64_t>(std::ceil(options_.headroom * (latency / measured) * rate)) + options_.window;
    // At least a failover's worth: the batches a failed server took with it
    // are made again elsewhere while the loop lives on the buffer.
    // Bounded by what the subset holds in flight twice over (window x
    // servers, Little's law), so that a fast step does not buffer seconds
    // of batches: memory stays the subset's, never the pool's.
    const double failover = std::min(absl::ToDoubleSeconds(options_.failover) * rate, 2.0 * options_.window * servers);
    depth = std::max<int64_t>(depth, static_cast<int64_t>(std::ceil(failover)) + options_.window);
  }
  prefetch_ =
      static_cast<int>(std::clamp<int64_t>(depth + options_.extra_prefetch, 2, std::min<int64_t>(cap, INT_MAX)));
}

}  // namespace stoker
