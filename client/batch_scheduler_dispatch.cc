// BatchScheduler's dispatch (batch_scheduler.h): which batch goes to which
// free stream now, by the fan-out's subset, shard affinity, the servers'
// limits and the lanes' in-flight windows.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/batch_scheduler.h"
#include "client/client_metrics.h"
#include "client/fanout.h"
#include "glog/logging.h"

namespace stoker {

std::string BatchScheduler::PreferredServer(int64_t seq, std::map<int64_t, std::vector<std::string>>* lanes) const {
  const EpochPlan& plan = PlanOf(EpochOf(seq));
  const int64_t lane = plan.BatchLane(BatchOf(seq));
  if (lane < 0) return "";
  // A window some server already reads stays with it while it is up.
  if (const auto w = windows_.find({EpochOf(seq), plan.BatchWindow(BatchOf(seq))}); w != windows_.end()) {
    const auto owner = servers_.find(w->second.owner);
    if (owner != servers_.end() && owner->second.member && owner->second.chosen) return w->second.owner;
  }
  auto it = lanes->find(EpochOf(seq));
  if (it == lanes->end()) {
    std::vector<std::string> chosen;
    for (const auto& [address, server] : servers_) {
      if (server.chosen && server.member) chosen.push_back(address);
    }
    // Keyed by epoch: each epoch deals its lanes afresh, the same way on
    // every rank with the same servers.
    if (!chosen.empty()) chosen = RendezvousOrder(absl::StrCat("shards/", EpochOf(seq)), chosen);
    it = lanes->emplace(EpochOf(seq), std::move(chosen)).first;
  }
  if (it->second.empty()) return "";
  return it->second[static_cast<size_t>(lane) % it->second.size()];
}

BatchScheduler::Choice BatchScheduler::Choose(int64_t b, const std::string& preferred, absl::Time now) {
  // The least-loaded live server with room: fast servers return batches
  // sooner, so they are asked more often. Among equally loaded ones, the one
  // asked least recently, so that when the consumer (not the servers) sets
  // the pace every server, also one that just joined, keeps getting work.
  // Within the server, its least-loaded stream, the one asked least
  // recently among equals (so that its lanes take turns). A batch a server
  // refused goes to another server. In the shard-aware order, `preferred`
  // (when it has room) before any other, then a server that already made
  // batches of the batch's window (it has read those shards), then any
  // server when no server has read the window yet (that one becomes its
  // reader), then the rest.
  const auto refused = attempts_.find(b);
  const WindowReaders* readers = nullptr;
  bool shard_aware = false;
  if (const int64_t w = PlanOf(EpochOf(b)).BatchWindow(BatchOf(b)); w >= 0) {
    shard_aware = true;
    const auto it = windows_.find({EpochOf(b), w});
    if (it != windows_.end()) readers = &it->second;
  }
  Choice c;
  int best_tier = -1;
  int64_t best_load = 0;
  for (auto& [address, server] : servers_) {
    // A server backing off after a failure gets no new work, also not on
    // its other lanes: a failed lane's batches go to other servers.
    if (now < server.retry_at || !server.chosen) continue;
    const int64_t load = Outstanding(server);
    if (load >= LimitsOf(address).window) continue;
    int tier = 0;
    if (!preferred.empty() && address == preferred) {
      tier = 3;
    } else if (readers && readers->servers.count(address)) {
      tier = 2;
    } else if (shard_aware && !readers) {
      tier = 1;
    }
    for (StreamId id : server.live) {
      Stream& s = streams_.at(id);
      if (s.retired || s.draining || s.half_closed) continue;
      c.room = true;
      if (refused != attempts_.end() && refused->second.refused_by.count(address)) continue;
      if (tier < best_tier) continue;
      if (!c.stream || tier > best_tier || load < best_load ||
          (load == best_load && std::make_pair(s.requested.size(), s.last_assigned) <
                                    std::make_pair(c.stream->requested.size(), c.stream->last_assigned))) {
        c.stream = &s;
        c.id = id;
        best_load = load;
        best_tier = tier;
        c.address = &address;
      }
    }
  }
  c.preferred = best_tier == 3;
  c.reader = best_tier == 2;
  c.no_new_reads = best_tier >= 1;
  return c;
}

bool BatchScheduler::CanWaitFor(const std::string& preferred, absl::Time now) const {
  const auto it = servers_.find(preferred);
  return it != servers_.end() && it->second.member && it->second.chosen && now >= it->second.retry_at &&
         !it->second.live.empty();
}

void BatchScheduler::Assign(int64_t b, const Choice& c, bool shard_aware, absl::Time now,
                            std::vector<Assignment>* out) {
  pending_.erase(b);
  if (shard_aware) {
    WindowReaders& readers = windows_[{EpochOf(b), PlanOf(EpochOf(b)).BatchWindow(BatchOf(b))}];
    if (readers.servers.empty()) readers.owner = *c.address;
    readers.servers.insert(*c.address);
    ++(c.preferred ? counts_.affinity_hits : counts_.affinity_misses);
    if (metrics_) (c.preferred ? metrics_->affinity_hits : metrics_->affinity_misses)->Increment();
  }
  c.stream->requested.insert(b);
  c.stream->last_assigned = ++assignments_;
  assigned_[b] = c.id;
  requested_at_[b] = now;
  out->push_back({c.id, EpochOf(b), BatchOf(b)});
  if (metrics_) metrics_->inflight_batches->Increment();
}

std::vector<Assignment> BatchScheduler::Dispatch(absl::Time now) {
  std::vector<Assignment> out;
  if (!error_.ok()) return out;
  // The shard-aware order: each batch's lane of shard windows has a
  // preferred server among this rank's (the epoch's lanes dealt over them),
  // which reads and caches those shards. A batch whose preferred server is
  // busy is held back within the prefetch budget, so that a server with
  // room takes batches of its own lanes first; what is held goes to any
  // server with room after the walk (no server idles, none is waited for).
  std::map<int64_t, std::vector<std::string>> lanes;
  std::vector<int64_t> held;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const int64_t b = *it;
    ++it;  // Assign erases b
    // The batch the caller waits for is always requested, whatever the limit
    // (which the next epoch's batches may fill): in order, the next one; out
    // of order, any of the current epoch while none of it is under way.
    const bool head = options_.ordered ? b == next_to_deliver_ : b < CurrentEnd() && !CurrentUnderWay();
    if (!head && static_cast<int64_t>(assigned_.size() + ready_.size() + held.size()) >= prefetch()) break;
    const std::string preferred = PreferredServer(b, &lanes);
    const Choice c = Choose(b, preferred, now);
    if (!c.room) break;
    if (!c.stream) continue;  // only servers that refused it have room: it waits for another
    // Held unless its preferred server takes it, or one that already reads
    // its window.
    if (!head && !preferred.empty() && !c.preferred && !c.reader && CanWaitFor(preferred, now)) {
      held.push_back(b);
      continue;
    }
    Assign(b, c, !preferred.empty(), now, &out);
  }
  // What is held goes first where it costs no new store reads (a server
  // that already reads its window, or any when nobody reads it yet: that
  // server becomes its reader, and its later batches prefer it), then to any
  // server with room, but only the batches due soonest (within as many as
  // there are chosen servers of the earliest not yet requested): the rest
  // wait for their own server, which frees up before the consumer reaches
  // them, instead of a second server reading their shards again.
  int64_t chosen = 0;
  for (const auto& [address, server] : servers_) chosen += server.chosen && server.member ? 1 : 0;
  const int64_t soon = pending_.empty() ? 0 : *pending_.begin() + std::max<int64_t>(1, chosen);
  for (bool free_only : {true, false}) {
    for (int64_t b : held) {
      if (!pending_.count(b)) continue;
      if (!free_only && b >= soon) break;
      const Choice c = Choose(b, "", now);
      if (!c.room) break;
      if (c.stream && (!free_only || c.no_new_reads)) Assign(b, c, true, now, &out);
    }
  }
  return out;
}

}  // namespace stoker
