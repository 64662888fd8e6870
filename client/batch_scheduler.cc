#include "client/batch_scheduler.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/bottleneck.h"
#include "client/client_metrics.h"
#include "client/fanout.h"
#include "common/field_layout.h"
#include "glog/logging.h"

namespace stoker {
namespace {

// Errors a server gives because of what was asked, not because it is unwell:
// asking another server the same gives the same answer.
bool IsBatchError(absl::StatusCode code) {
  return code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument ||
         code == absl::StatusCode::kNotFound || code == absl::StatusCode::kPermissionDenied ||
         code == absl::StatusCode::kFailedPrecondition;
}

}  // namespace

BatchScheduler::BatchScheduler(EpochPlan plan, SchedulerOptions options, ClientMetrics* metrics, BottleneckMeter* meter)
    : first_epoch_(plan.epoch()),
      per_epoch_(plan.num_batches()),
      options_(std::move(options)),
      metrics_(metrics),
      meter_(meter),
      jitter_state_(options_.jitter_seed ? options_.jitter_seed : std::random_device{}()) {
  plans_.push_back(std::move(plan));
  if (options_.fanout) fanout_.emplace(*options_.fanout);
  for (int64_t b = 0; b < per_epoch_; ++b) {
    if (options_.already_delivered.count(b)) {
      delivered_.insert(b);
    } else {
      pending_.insert(b);
    }
  }
  while (delivered_.count(next_to_deliver_)) ++next_to_deliver_;
}

absl::Status BatchScheduler::ArmEpoch(EpochPlan plan) {
  if (plan.epoch() != last_armed_epoch() + 1 || plan.num_batches() != per_epoch_) {
    return absl::InvalidArgumentError(absl::StrCat("epoch ", plan.epoch(), " of ", plan.num_batches(),
                                                   " batches cannot follow epoch ", last_armed_epoch(), " of ",
                                                   per_epoch_));
  }
  const int64_t epoch = plan.epoch();
  plans_.push_back(std::move(plan));
  for (int64_t b = 0; b < per_epoch_; ++b) pending_.insert(Seq(epoch, b));
  return absl::OkStatus();
}

bool BatchScheduler::CanAdvance() const { return error_.ok() && CurrentDelivered() && plans_.size() > 1; }

absl::Status BatchScheduler::AdvanceEpoch() {
  if (!CanAdvance()) {
    return absl::FailedPreconditionError(
        absl::StrCat("epoch ", epoch(), " cannot be left yet (", delivered_.size(), " of ", per_epoch_,
                     " batches handed over; next epoch armed: ", plans_.size() > 1 ? "yes" : "no", ")"));
  }
  plans_.pop_front();
  windows_.erase(windows_.begin(), windows_.lower_bound({epoch(), int64_t{-1}}));
  delivered_.erase(delivered_.begin(), delivered_.lower_bound(CurrentBegin()));
  attempts_.erase(attempts_.begin(), attempts_.lower_bound(CurrentBegin()));
  next_to_deliver_ = std::max(next_to_deliver_, CurrentBegin());
  return absl::OkStatus();
}

std::vector<int64_t> BatchScheduler::SampleIndices(int64_t epoch, int64_t batch) const {
  return PlanOf(epoch).BatchIndices(batch);
}

std::string BatchScheduler::Describe(int64_t seq) const {
  return absl::StrCat("batch ", BatchOf(seq), " of epoch ", EpochOf(seq));
}

int64_t BatchScheduler::ArmedSeq(int64_t epoch, int64_t batch) const {
  if (epoch < this->epoch() || epoch > last_armed_epoch() || batch < 0 || batch >= per_epoch_) return -1;
  return Seq(epoch, batch);
}

SchedulerOptions::Limits BatchScheduler::LimitsOf(const std::string& address) const {
  auto it = options_.producer_limits.find(address);
  SchedulerOptions::Limits l = it != options_.producer_limits.end()
                                   ? it->second
                                   : SchedulerOptions::Limits{options_.window, options_.streams_per_server};
  return {std::max(1, l.window), std::max(1, l.lanes)};
}

uint64_t BatchScheduler::NextJitter() {  // SplitMix64
  uint64_t z = (jitter_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::vector<std::string> BatchScheduler::OnMembership(const std::vector<std::string>& addresses, absl::Time now) {
  std::vector<std::string> to_open;
  for (auto& [address, server] : servers_) server.member = false;
  for (const std::string& a : addresses) servers_[a].member = true;
  Rechoose(now);
  for (auto& [address, server] : servers_) {
    const size_t lanes = static_cast<size_t>(LimitsOf(address).lanes);
    if (!server.member) {
      if (meter_) meter_->demand().ForgetServer(address);
      for (StreamId id : server.live) {
        Stream& s = streams_.at(id);
        if (!s.draining) LOG(INFO) << "server " << address << " left the set: it finishes what it has";
        s.draining = true;  // left the set (DNS): finish what it has
        MaybeHalfClose(id);
      }
    }
    if (server.member && server.chosen && server.live.size() < lanes && now >= server.retry_at &&
        now >= server.full_until && error_.ok() && !Done()) {
      to_open.insert(to_open.end(), lanes - server.live.size(), address);
    }
  }
  return to_open;
}

void BatchScheduler::Rechoose(absl::Time now) {
  if (!fanout_) return;
  std::vector<std::string> eligible;
  for (const auto& [address, server] : servers_) {
    if (!server.member || options_.producer_limits.count(address)) continue;  // the local producer is always used
    if (now < server.retry_at || now < server.full_until) continue;
    eligible.push_back(address);
  }
  // A batch that r servers refused needs an (r + 1)-th to try it.
  size_t refusals = 0;
  for (const auto& [b, a] : attempts_) {
    if (!assigned_.count(b) && !ready_.count(b)) refusals = std::max(refusals, a.refused_by.size());
  }
  const std::vector<std::string>& chosen = fanout_->Choose(eligible, static_cast<int>(refusals) + 1, now);
  const std::set<std::string> in(chosen.begin(), chosen.end());
  for (auto& [address, server] : servers_) {
    const bool was = server.chosen;
    // A server backing off or full keeps its flag: it is out of the subset
    // (not eligible), and its streams are already ending or refused.
    server.chosen = options_.producer_limits.count(address) > 0 || in.count(address) > 0;
    if (was && !server.chosen) {
      for (StreamId id : server.live) MaybeHalfClose(id);
    }
  }
}

std::vector<std::string> BatchScheduler::ServersInUse() const {
  std::vector<std::string> out;
  for (const auto& [address, server] : servers_) {
    if (server.member && server.chosen && !options_.producer_limits.count(address)) out.push_back(address);
  }
  return out;
}

void BatchScheduler::OnConnectFailed(const std::string& address, const std::string& why) {
  Server& server = servers_[address];
  if (server.last_error.empty()) server.last_error = why;
}

int BatchScheduler::FreeLane(const std::string& address) const {
  auto it = servers_.find(address);
  if (it == servers_.end()) return 0;
  std::set<int> used;
  for (StreamId id : it->second.live) used.insert(streams_.at(id).lane);
  int lane = 0;
  while (used.count(lane)) ++lane;
  return lane;
}

StreamId BatchScheduler::OnStreamOpened(const std::string& address, absl::Time now) {
  const StreamId id = next_stream_++;
  const int lane = FreeLane(address);
  Stream& s = streams_[id];
  s.address = address;
  s.lane = lane;
  s.opened = now;
  servers_[address].live.push_back(id);
  return id;
}

int64_t BatchScheduler::Outstanding(const Server& server) const {
  int64_t n = 0;
  for (StreamId id : server.live) n += static_cast<int64_t>(streams_.at(id).requested.size());
  return n;
}

void BatchScheduler::OnDraining(StreamId id) {
  Stream& s = streams_.at(id);
  if (!s.draining) LOG(INFO) << "server " << s.address << " is draining: no new work for it";
  s.draining = true;
  MaybeHalfClose(id);
}

void BatchScheduler::OnStreamEnded(StreamId id, const StreamEnd& end, absl::Time now) {
  Stream& s = streams_.at(id);
  Server& server = servers_[s.address];
  const absl::Status& status = end.status;
  const bool first = server.last_error != status.message();
  switch (end.kind) {
    case StreamEnd::Kind::kEnded: break;
    case StreamEnd::Kind::kSessionRefused:
      Retire(s, status, /*from_server=*/false, now);
      server.retry_at = now + options_.refused_retry;
      if (metrics_) metrics_->SessionRefusals(s.address).Increment();
      if (first) LOG(ERROR) << "server " << s.address << " refused the session and gets no work: " << status;
      return;
    case StreamEnd::Kind::kServerFull:
      Retire(s, absl::OkStatus(), /*from_server=*/false, now);  // an orderly end: nothing blamed
      // No new stream before the hint; the server's live lanes (if any were
      // admitted) keep getting work.
      server.full_until = std::max(server.full_until, now + end.retry_after);
      server.last_error = std::string(status.message());
      if (metrics_) metrics_->ServerFull(s.address).Increment();
      if (first) LOG(WARNING) << "server " << s.address << " is full; using the others: " << status;
      return;
    case StreamEnd::Kind::kLocalFailure:
      Retire(s, absl::OkStatus(), /*from_server=*/false, now);  // no server blamed
      Fail(absl::Status(status.code(), status.message()));      // the caller's error, without the marker
      return;
  }
  absl::Status why = status;
  bool from_server = end.from_server;
  if (why.ok() && !s.requested.empty()) {
    why = absl::DataLossError(absl::StrCat("stream closed with ", s.requested.size(), " batches outstanding"));
    from_server = false;
  }
  // The batch the server named: -1 blames every outstanding one, -2 none.
  int64_t failed_seq = -1;
  if (end.failed_batch >= 0) {
    failed_seq = -2;
    for (int64_t seq : s.requested) {  // lowest first
      if (BatchOf(seq) == end.failed_batch && (end.failed_epoch < 0 || EpochOf(seq) == end.failed_epoch)) {
        failed_seq = seq;
        break;
      }
    }
  }
  Retire(s, why, from_server, now, failed_seq);
}

void BatchScheduler::Retire(Stream& stream, const absl::Status& status, bool from_server, absl::Time now,
                            int64_t failed_seq) {
  if (stream.retired) return;
  stream.retired = true;
  Server& server = servers_[stream.address];
  server.live.erase(
      std::remove_if(server.live.begin(), server.live.end(), [&](StreamId id) { return &streams_.at(id) == &stream; }),
      server.live.end());
  const size_t lost = stream.requested.size();
  // Refusals by this many distinct servers end the epoch: poison_servers, or
  // every server in the set if there are fewer.
  int members = 0;
  for (const auto& [address, srv] : servers_) members += srv.member;
  const int needed = std::max(1, std::min(options_.poison_servers, members));
  for (int64_t b : stream.requested) {
    assigned_.erase(b);
    requested_at_.erase(b);
    pending_.insert(b);  // asked again from the others; same content
    ++counts_.reassigned;
    if (metrics_) {
      metrics_->reassigned_batches->Increment();
      metrics_->inflight_batches->Decrement();
    }
    if (status.ok()) continue;
    Attempts& a = attempts_[b];
    ++a.count;
    const bool blamed = failed_seq == -1 || failed_seq == b;
    // A server's timer (DEADLINE_EXCEEDED for the batch it names: a sample
    // past --max-sample-seconds, a Python worker's timeout or crash) depends
    // on its load: the batch is asked again (of the others first), and a
    // server has given up on it once it timed out twice; the epoch ends once
    // every server (up to poison_servers) gave up, naming the sample and limit.
    const bool timer = from_server && status.code() == absl::StatusCode::kDeadlineExceeded && failed_seq == b &&
                       ++a.timers_by[stream.address] >= 2;
    if ((from_server && IsBatchError(status.code()) && blamed) || timer) {
      a.refused_by[stream.address] = status;
      if (static_cast<int>(a.refused_by.size()) >= needed) {
        Fail(absl::Status(status.code(),
                          absl::StrCat(Describe(b), " failed on ", a.refused_by.size(), " servers (",
                                       absl::StrJoin(a.refused_by, ", ",
                                                     [](std::string* out, const auto& kv) { out->append(kv.first); }),
                                       "): ", status.message())));
        continue;
      }
    }
    if (a.count >= options_.max_attempts) {
      Fail(absl::Status(status.code(),
                        absl::StrCat(Describe(b), " was requested ", a.count,
                                     " times without success; last: ", stream.address, ": ", status.message())));
    }
  }
  stream.requested.clear();
  if (status.ok()) {
    // An orderly end does not cut short a backoff that another stream of
    // the server started.
    if (now >= server.retry_at) {
      server.failures = 0;
      server.retry_at = now;
    }
    return;
  }
  server.last_error = std::string(status.message());
  if (metrics_) metrics_->ServerFailures(stream.address).Increment();
  // Refusals that a retry will not change wait the longest.
  const bool refusal = IsBatchError(status.code()) && from_server;
  if (now < server.retry_at && !refusal) {
    // Another stream of this server failed moments ago (a server that dies
    // ends all its lanes): one event, one backoff.
    if (lost > 0) {
      LOG(WARNING) << "server " << stream.address << " failed (" << status << "); " << lost
                   << " batches go to other servers";
    }
    return;
  }
  ++server.failures;
  absl::Duration backoff = options_.reconnect_min * (1 << std::min(server.failures - 1, 16));
  if (refusal) backoff = options_.reconnect_max;
  const double jitter = 0.5 + 0.5 * static_cast<double>(NextJitter() >> 11) / static_cast<double>(1ULL << 53);
  backoff = std::min(backoff, options_.reconnect_max) * jitter;
  server.retry_at = std::max(server.retry_at, now + backoff);
  if (server.failures == 1 || lost > 0) {
    LOG(WARNING) << "server " << stream.address << " failed (" << status << "); " << lost
                 << " batches go to other servers; retrying in " << absl::FormatDuration(backoff);
  }
}

void BatchScheduler::Fail(absl::Status status) {
  if (!error_.ok()) return;
  error_ = std::move(status);
  LOG(ERROR) << "epoch " << epoch() << " ends: " << error_;
  for (auto& [id, s] : streams_) MaybeHalfClose(id);
}

absl::Status BatchScheduler::CheckHeader(StreamId id, const v1::BatchHeader& h) const {
  const Stream& s = streams_.at(id);
  const int64_t b = h.batch_index();
  const int64_t seq = ArmedSeq(h.epoch(), b);
  if (seq < 0 || s.requested.count(seq) == 0) {
    return absl::DataLossError(
        absl::StrCat("sent batch ", b, " of epoch ", h.epoch(), ", which was not requested from it"));
  }
  const std::vector<int64_t> expected = PlanOf(h.epoch()).BatchIndices(b);
  const int64_t n = static_cast<int64_t>(expected.size());
  if (!std::equal(expected.begin(), expected.end(), h.sample_indices().begin(), h.sample_indices().end())) {
    return absl::DataLossError(absl::StrCat("sent batch ", b, " with other sample indices than requested (",
                                            h.sample_indices_size(), " indices, ", n, " requested)"));
  }
  if (h.labels_size() != n) {
    return absl::DataLossError(
        absl::StrCat("sent batch ", b, " with ", h.labels_size(), " labels for ", n, " samples"));
  }
  if (options_.variable_samples && (h.field_bytes() != 0 || h.fields_size() != 0)) {
    return absl::DataLossError(absl::StrCat("sent batch ", b, " of stored samples with fields"));
  }
  if (options_.variable_samples) {
    int64_t sum = 0;
    for (int64_t size : h.sample_sizes()) {
      // Each within what is left of total_bytes: the sum never overflows.
      if (size < 0 || size > h.total_bytes() - sum) {
        return absl::DataLossError(absl::StrCat("sent batch ", b, " with a sample of ", size, " bytes in ",
                                                h.total_bytes(), " (", sum, " taken)"));
      }
      sum += size;
    }
    if (h.sample_sizes_size() != n || sum != h.total_bytes()) {
      return absl::DataLossError(absl::StrCat("sent batch ", b, " with ", h.sample_sizes_size(),
                                              " sample sizes adding up to ", sum, " bytes for ", n, " samples in ",
                                              h.total_bytes(), " bytes"));
    }
    return absl::OkStatus();
  }
  if (h.field_bytes() > n * options_.max_sample_field_bytes) {
    return absl::DataLossError(absl::StrCat("sent batch ", b, " with ", h.field_bytes(), " field bytes; its ", n,
                                            " samples may have at most ", n * options_.max_sample_field_bytes));
  }
  if (absl::Status fields = CheckFieldLayout(h, options_.value_fields); !fields.ok()) {
    return absl::DataLossError(absl::StrCat("sent batch ", b, " with bad fields: ", fields.message()));
  }
  std::vector<int64_t> shape{n};
  shape.insert(shape.end(), options_.sample_shape.begin(), options_.sample_shape.end());
  if (!options_.sample_shape.empty() && !std::equal(shape.begin(), shape.end(), h.shape().begin(), h.shape().end())) {
    return absl::DataLossError(absl::StrCat("sent batch ", b, " of shape [", absl::StrJoin(h.shape(), ","),
                                            "]; the session's is [", absl::StrJoin(shape, ","), "]"));
  }
  if (h.total_bytes() != n * options_.sample_bytes) {
    return absl::DataLossError(
        absl::StrCat("sent batch ", b, " of ", h.total_bytes(), " bytes; expected ", n, " x ", options_.sample_bytes));
  }
  return absl::OkStatus();
}

absl::Status BatchScheduler::OnBatchReceived(StreamId id, Batch batch, absl::Time now) {
  Stream& s = streams_.at(id);
  const int64_t b = ArmedSeq(batch.epoch, batch.batch_index);
  const int64_t n = b < 0 ? 0 : static_cast<int64_t>(PlanOf(batch.epoch).BatchIndices(batch.batch_index).size());
  const bool size_ok = options_.variable_samples ? static_cast<int64_t>(batch.sample_sizes.size()) == n
                                                 : static_cast<int64_t>(batch.data.size()) == n * options_.sample_bytes;
  if (b < 0 || s.requested.count(b) == 0 || !size_ok) {
    return absl::DataLossError(absl::StrCat("sent batch ", batch.batch_index, " of epoch ", batch.epoch, " (",
                                            batch.data.size(),
                                            " bytes), which was not requested from it in that size"));
  }
  s.proven = true;
  s.requested.erase(b);
  assigned_.erase(b);
  auto it = requested_at_.find(b);
  if (it != requested_at_.end()) {
    batch.receive_latency = now - it->second;
    requested_at_.erase(it);
  }
  if (fanout_) {
    fanout_->OnBatch(s.address, batch.receive_latency, batch.stage_times.queue_seconds(),
                     batch.stage_times.server_seconds());
  }
  if (meter_) {
    meter_->OnBatch(batch.stage_times, batch.receive_latency);
    meter_->demand().OnCapacity(s.address, batch.stage_times.capacity_images_per_second());
  }
  if (metrics_) {
    metrics_->batches->Increment();
    metrics_->ServerBatches(s.address).Increment();
    metrics_->inflight_batches->Decrement();
    metrics_->buffered_batches->Increment();
    metrics_->receive_latency_seconds->Observe(absl::ToDoubleSeconds(batch.receive_latency));
    metrics_->failed_samples->Increment(static_cast<double>(batch.failed_samples.size()));
  }
  ready_.emplace(b, std::move(batch));
  if (Done()) {
    for (auto& [sid, stream] : streams_) MaybeHalfClose(sid);
  } else {
    MaybeHalfClose(id);
  }
  return absl::OkStatus();
}

std::vector<StreamId> BatchScheduler::Tick(absl::Time now) {
  std::vector<StreamId> to_cancel;
  if (fanout_) {
    if (meter_ && per_epoch_ > 0) {
      const double images = meter_->demand().Report().demand_images_per_second;
      const size_t batch = PlanOf(epoch()).BatchIndices(0).size();
      fanout_->SetDemand(batch > 0 ? images / static_cast<double>(batch) : 0);
    }
    fanout_->Evaluate(now);
  }
  if (metrics_) {
    metrics_->servers_in_use->Set(static_cast<double>(ServersInUse().size()));
    metrics_->prefetch_batches->Set(prefetch());
    const int64_t batch_bytes = options_.fanout ? options_.fanout->batch_bytes : 0;
    metrics_->prefetch_bytes->Set(static_cast<double>(prefetch()) * static_cast<double>(batch_bytes));
  }
  // A batch outstanding too long: give its stream up.
  for (const auto& [b, at] : requested_at_) {
    if (now - at <= options_.batch_timeout) continue;
    const StreamId id = assigned_.at(b);
    Retire(streams_.at(id),
           absl::DeadlineExceededError(
               absl::StrCat(Describe(b), " took longer than ", absl::FormatDuration(options_.batch_timeout))),
           /*from_server=*/false, now);
    to_cancel.push_back(id);
    break;  // requested_at_ changed; look again next tick
  }
  int live = 0;
  for (auto& [address, server] : servers_) {
    // A full server answered: the run waits for room rather than failing as
    // if nothing answered (a margin covers the next attempt's round trip).
    if (server.member && now < server.full_until + absl::Seconds(5)) ++live;
    for (StreamId id : server.live) {
      Stream& s = streams_.at(id);
      if (!s.proven && now - s.opened >= options_.proven_after) s.proven = true;
      live += !s.draining && s.proven;
    }
  }
  if (Done() || live > 0) {
    no_server_since_ = absl::InfiniteFuture();
  } else if (no_server_since_ == absl::InfiniteFuture()) {
    no_server_since_ = now;
  } else if (now - no_server_since_ > options_.unavailable_timeout && error_.ok()) {
    std::vector<std::string> why;
    for (const auto& [address, server] : servers_) {
      why.push_back(absl::StrCat(address, " (", server.last_error.empty() ? "draining" : server.last_error, ")"));
    }
    Fail(absl::UnavailableError(absl::StrCat("no data server answered for ",
                                             absl::FormatDuration(options_.unavailable_timeout), ": ",
                                             absl::StrJoin(why, ", "))));
  }
  return to_cancel;
}

void BatchScheduler::MaybeHalfClose(StreamId id) {
  Stream& s = streams_.at(id);
  if (s.half_closed || s.retired || !s.requested.empty()) return;
  // Streams end with the run: when its last epoch is received (when known;
  // otherwise they stay open for an epoch that may still be armed, until the
  // run is dropped), on an error, or when their server drains.
  const bool run_received = Done() && options_.final_epoch >= 0 && last_armed_epoch() >= options_.final_epoch;
  auto server = servers_.find(s.address);
  const bool left_out = server != servers_.end() && !server->second.chosen;  // fan-out: not in the subset now
  if (!s.draining && !run_received && error_.ok() && !left_out) return;
  s.half_closed = true;
  half_close_.push_back(id);
}

std::vector<StreamId> BatchScheduler::TakeHalfCloses() { return std::exchange(half_close_, {}); }

bool BatchScheduler::CurrentUnderWay() const {
  return (!assigned_.empty() && assigned_.begin()->first < CurrentEnd()) ||
         (!ready_.empty() && ready_.begin()->first < CurrentEnd());
}

bool BatchScheduler::Done() const { return pending_.empty() && assigned_.empty(); }

bool BatchScheduler::CanTake() const {
  if (CurrentDelivered() || !error_.ok()) return true;
  if (options_.ordered) return ready_.count(next_to_deliver_) > 0;
  return !ready_.empty() && ready_.begin()->first < CurrentEnd();
}

absl::Status BatchScheduler::Take(Batch* batch, bool* end_of_epoch) {
  *end_of_epoch = false;
  if (CurrentDelivered()) {
    *end_of_epoch = true;
    return absl::OkStatus();
  }
  auto it = options_.ordered ? ready_.find(next_to_deliver_) : ready_.begin();
  if (it == ready_.end() || it->first >= CurrentEnd()) {
    return error_.ok() ? absl::FailedPreconditionError("Take called with no batch ready") : error_;
  }
  *batch = std::move(it->second);
  delivered_.insert(it->first);
  ready_.erase(it);
  while (delivered_.count(next_to_deliver_)) ++next_to_deliver_;
  if (metrics_) metrics_->buffered_batches->Decrement();
  return absl::OkStatus();
}

void BatchScheduler::Position(int64_t* next, std::vector<int64_t>* beyond) const {
  const int64_t begin = CurrentBegin();
  *next = std::min(next_to_deliver_, CurrentEnd()) - begin;
  beyond->clear();
  for (auto it = delivered_.upper_bound(next_to_deliver_); it != delivered_.end() && *it < CurrentEnd(); ++it) {
    beyond->push_back(*it - begin);
  }
}

void BatchScheduler::ReleaseGauges() {
  if (!metrics_) return;
  metrics_->buffered_batches->Decrement(static_cast<double>(ready_.size()));
  metrics_->inflight_batches->Decrement(static_cast<double>(assigned_.size()));
}

}  // namespace stoker
