// Bounded fan-out: which servers of the pool one rank streams from, and how
// many batches it keeps requested or buffered. A plain core (no gRPC, no
// threads, time passed in) that BatchScheduler consults.
//
// Which servers: the first `target` of the eligible servers (members, not
// backing off, not full) in this rank's rendezvous order: each server scored
// by a hash of (rank key, address), highest first. Every rank has its own
// order, so ranks spread evenly over the pool; a server that joins or leaves
// moves only the ranks that rank it among their first `target`.
//
// How many: `initial_servers` at first; then every `interval`, from the
// rank's demand D (batches/s the loop consumes when it does not wait) and
// each chosen server's supply to this rank (window / request-to-arrival
// latency, Little's law):
// - short (supply < headroom x D): a probe. If a chosen server is saturated
//   (its batches wait in its queue longer than kSaturatedQueue times their
//   making), the rank moves off it (it is avoided for 30 intervals, and the
//   next server in order takes its place); otherwise it grows at once to as
//   many servers as its demand needs at the supply its chosen servers
//   measured (ceil(headroom x D / supply per server) in all; at least one
//   more). If the
//   first new server turns out saturated too while the rank is still short,
//   the pool has no room there either: a grown target shrinks back by what
//   it grew (a move goes back to the server it left) and the next probe waits
//   twice as long (up to 64 intervals). So
//   ranks leave overloaded servers for idle ones while the pool has room,
//   and a pool short of capacity keeps each rank near its size instead of
//   every rank streaming from every server.
// - oversupplied (supply without the weakest server >= 1.5 x headroom x D):
//   one server fewer.
// - never below min_servers (failover) nor above max_servers.
//
// Prefetch (memory by time): with R = min(D, supply), depth =
// max(ceil(headroom x latency x R), ceil(min(failover x R, 2 x window x
// servers))) + window batches, at least 2, at most
// prefetch_bytes / batch_bytes; before a demand is known, 2 x window x
// target. The failover term keeps the loop fed while the batches a failed
// server took are made again elsewhere. An explicit depth wins.
#ifndef STOKER_CLIENT_FANOUT_H_
#define STOKER_CLIENT_FANOUT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace stoker {

struct FanoutOptions {
  std::string key;          // this rank's identity (job and rank): its servers' order
  int min_servers = 2;      // failover: at least this many where the pool has them
  int initial_servers = 2;  // before a demand is measured
  int max_servers = 32;     // 0: the whole pool
  double headroom = 1.25;
  absl::Duration interval = absl::Seconds(2);  // between changes of the target
  absl::Duration failover = absl::Seconds(2);  // of demand the prefetch covers at least (up to 2 x window x servers)
  int window = 2;                              // batches requested from one server at a time
  // Prefetch: fixed_prefetch > 0 is that many batches, always; otherwise by
  // time, capped at prefetch_bytes / batch_bytes (prefetch_bytes 0: no cap).
  int fixed_prefetch = 0;
  int64_t batch_bytes = 0;
  int64_t prefetch_bytes = 0;
  int extra_prefetch = 0;                    // batches for producers outside the fan-out (the local producer)
  std::map<std::string, double> capacities;  // as SetCapacities, from the servers' OpenSession answers
};

// A server's wait in its queue beyond this many times its making marks it
// saturated (it has more requests than its workers take).
inline constexpr double kSaturatedQueue = 2.0;
// ... and longer than this (a queue of a few quick batches is no sign).
inline constexpr absl::Duration kSaturatedFloor = absl::Milliseconds(50);
// The training loop waiting for batches more than this share of an interval
// marks the rank starved: it probes for one more server too.
inline constexpr double kStarved = 0.05;

// Rendezvous order of `servers` for `key`: highest score first. Stable
// across processes (a fixed hash, not absl::Hash's per-process seed). With
// `weights` (server -> weight > 0; missing ones weigh the mean of the
// others), weighted rendezvous: a server is first for a share of the keys
// proportional to its weight.
std::vector<std::string> RendezvousOrder(const std::string& key, const std::vector<std::string>& servers,
                                         const std::map<std::string, double>& weights = {});

class Fanout {
 public:
  explicit Fanout(FanoutOptions options);

  // What each server can make (its capacity as it reported it, any unit
  // common to all): ranks choose servers in proportion to the square root
  // of it, so that faster servers take more ranks while streams per server
  // stay within 2x of each other where capacities differ 4x; pull
  // scheduling shifts the rest of the load to them.
  void SetCapacities(std::map<std::string, double> capacities);
  // Batches per second the training loop consumes when it does not wait
  // (<= 0: not known).
  void SetDemand(double batches_per_second) { demand_ = batches_per_second; }
  // A batch from `server`: requested to last byte, and the server's queue
  // and total times for it (StageTimes).
  void OnBatch(const std::string& server, absl::Duration latency, double queue_seconds, double server_seconds);
  // The servers to stream from now: the first max(target, at_least) of
  // `eligible` in this rank's order (all of them if fewer). Remembered as
  // the current choice.
  const std::vector<std::string>& Choose(const std::vector<std::string>& eligible, int at_least, absl::Time now);
  // The training loop waited this long for a batch (starved_ratio: the
  // share of the last interval spent waiting, for metrics and tests).
  void OnWait(absl::Duration waited);
  // Every call may change the target (at most once an interval).
  void Evaluate(absl::Time now);

  int target() const { return target_; }
  int prefetch() const { return prefetch_; }
  const std::vector<std::string>& chosen() const { return chosen_; }
  // For tests and metrics: what the last Evaluate saw.
  double supply() const { return supply_; }
  double starved_ratio() const { return starved_ratio_; }
  double demand() const { return demand_; }
  bool saturated(const std::string& server) const;
  int probes_dropped() const { return probes_dropped_; }

 private:
  struct ServerStats {
    int batches = 0;
    double latency = 0, queue = 0, make = 0;  // seconds, decaying averages
  };
  // Supply of `server` to this rank (batches/s); < 0 if not measured.
  double SupplyOf(const std::string& server) const;
  int Cap() const;
  int Floor() const;
  void SetPrefetch();

  const FanoutOptions options_;
  int target_;
  int prefetch_ = 0;
  double demand_ = 0, supply_ = 0;
  std::vector<std::string> chosen_;
  int eligible_ = 0;  // servers the last Choose could pick from
  std::map<std::string, ServerStats> stats_;
  std::map<std::string, double> weights_;  // sqrt of the capacities
  absl::Time next_change_ = absl::InfinitePast();
  absl::Duration waited_;  // since window_start_
  absl::Time window_start_ = absl::InfinitePast();
  double starved_ratio_ = 0;
  bool started_ = false;  // past the first interval with a measured server
  // A probe: the server added while short, judged once it has answered.
  std::string probe_;
  absl::Time probe_since_;
  absl::Duration probe_backoff_;
  absl::Time next_probe_ = absl::InfinitePast();
  enum class Probe { kNone, kGrow, kMove };
  Probe pending_ = Probe::kNone;             // a probe made since the last Choose: its new server is the probe
  Probe probing_ = Probe::kNone;             // what probe_ is
  int grown_by_ = 0;                         // servers the last kGrow added (a dropped probe takes them all back)
  std::map<std::string, absl::Time> avoid_;  // servers moved off, until when
  std::string moved_off_;                    // the server the last move left
  int probes_dropped_ = 0;
};

}  // namespace stoker

#endif  // STOKER_CLIENT_FANOUT_H_
