#include "client/epoch_run.h"
#include "client/epoch_run_streams.h"

#include <atomic>
#include <cstring>
#include <deque>
#include <utility>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/chunk_assembler.h"
#include "common/stream_trailers.h"
#include "glog/logging.h"

namespace stoker {
namespace {

// BatchStream's full method name. Load-bearing: must match stoker.proto.
constexpr char kBatchStreamMethod[] = "/stoker.v1.DataService/BatchStream";
constexpr absl::Duration kSupervisorTick = absl::Milliseconds(100);
// A channel to a server out of the rank's subset that no stream has used for
// this long is closed (ServerSet::CloseIdle), checked every few seconds.
constexpr absl::Duration kIdleChannel = absl::Seconds(10);
constexpr absl::Duration kIdleCheck = absl::Seconds(2);
constexpr absl::Duration kVerdictInterval = absl::Seconds(2);

grpc::ByteBuffer Serialize(const v1::StreamRequest& request) {
  grpc::ByteBuffer buffer;
  bool own = false;
  grpc::SerializationTraits<v1::StreamRequest>::Serialize(request, &buffer, &own);
  return buffer;
}

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

// One BatchStream call. Writes are queued (one in flight at a time, as gRPC
// requires); reads run back to back on gRPC's threads and feed the
// assembler. A hold keeps the call open while writes may still be started
// from outside a reaction; it is removed once no more will be (writes done,
// reads ended, or the stream failed). The object outlives the call: EpochRun
// destroys it after OnDone.
class EpochRun::GrpcStream final : public EpochRun::Stream,
                                   public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  GrpcStream(EpochRun* run, StreamId id, const std::string& address, std::shared_ptr<grpc::Channel> channel,
             grpc::ByteBuffer config)
      : run_(run),
        id_(id),
        address_(address),
        assembler_(address, run->options_.buffers,
                   [run, id](const v1::BatchHeader& h) { return run->CheckHeader(id, h); }),
        stub_(std::move(channel)) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + run->options_.stream_timeout));
    run->servers_->Authorize(&context_);
    // The config is the first write, in flight from the start: a request the
    // scheduler sends before Start() queues behind it instead of racing it.
    current_ = std::move(config);
    absl::MutexLock lock(&mu_);
    in_flight_ = true;
  }

  void Start() override {
    stub_.PrepareBidiStreamingCall(&context_, kBatchStreamMethod, grpc::StubOptions(), this);
    AddHold();
    StartWrite(&current_);
    StartRead(&read_buffer_);
    StartCall();
  }

  void Write(const v1::BatchRequest& request) override {
    v1::StreamRequest r;
    *r.mutable_batch() = request;
    grpc::ByteBuffer message = Serialize(r);
    {
      absl::MutexLock lock(&mu_);
      if (closed_ || writes_done_) return;  // ending: its batches are requested elsewhere
      if (in_flight_) {
        queue_.push_back(std::move(message));
        return;
      }
      in_flight_ = true;
      current_ = std::move(message);
    }
    StartWrite(&current_);
  }

  void HalfClose() override {
    {
      absl::MutexLock lock(&mu_);
      if (closed_ || writes_done_) return;
      writes_done_ = true;
      if (in_flight_) return;  // OnWriteDone sends it after the queue
    }
    StartWritesDone();
    ReleaseHold();
  }

  void Cancel() override {
    cancelled_by_us_ = true;
    context_.TryCancel();
  }

  void WaitDone() override { done_.WaitForNotification(); }

  void OnWriteDone(bool ok) override {
    bool write = false, writes_done = false;
    {
      absl::MutexLock lock(&mu_);
      in_flight_ = false;
      if (!ok) queue_.clear();  // the call is ending
      if (!queue_.empty()) {
        current_ = std::move(queue_.front());
        queue_.pop_front();
        in_flight_ = write = true;
      } else if (ok && writes_done_ && !closed_) {
        writes_done = true;
      }
    }
    if (write) StartWrite(&current_);
    if (writes_done) {
      StartWritesDone();
      ReleaseHold();
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) return ReleaseHold();  // the server finished, or the call is gone
    const size_t bytes = read_buffer_.Length();
    absl::StatusOr<std::optional<Batch>> batch = assembler_.Add(&read_buffer_);
    absl::Status status = batch.status();
    if (status.ok() && run_->metrics_) run_->metrics_->received_bytes->Increment(static_cast<double>(bytes));
    if (status.ok() && assembler_.draining() && !draining_seen_) {
      draining_seen_ = true;
      run_->OnDraining(id_);
    }
    if (status.ok() && batch->has_value()) status = run_->OnBatch(id_, **std::move(batch));
    if (!status.ok()) {  // a broken or lying server: give the stream up
      failure_ = status;
      context_.TryCancel();
      return ReleaseHold();
    }
    StartRead(&read_buffer_);
  }

  void OnDone(const grpc::Status& status) override {
    // Our own checks first; then the server's answer, unless we cancelled.
    const bool ours = !failure_.ok() || cancelled_by_us_;
    // The server names the batch whose failure ended the stream (stream_state.h).
    const auto& trailers = context_.GetServerTrailingMetadata();
    auto number = [&trailers](const char* key) -> int64_t {
      int64_t value = -1;
      auto it = trailers.find(key);
      if (it == trailers.end() || !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &value)) {
        return -1;
      }
      return value;
    };
    const int64_t failed_batch = number(kFailedBatchTrailer), failed_epoch = number(kFailedEpochTrailer);
    const bool refused = !ours && trailers.find(kSessionRefusedTrailer) != trailers.end();
    const int64_t retry_ms = refused ? number(kRetryAfterTrailer) : -1;  // the server is full
    run_->OnStreamDone(id_, failure_.ok() ? FromGrpc(status) : failure_, /*from_server=*/!ours && !status.ok(),
                       failed_batch, failed_epoch, refused,
                       retry_ms >= 0 ? absl::Milliseconds(retry_ms) : absl::ZeroDuration());
    done_.Notify();
  }

 private:
  void ReleaseHold() {
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
    }
    RemoveHold();
  }

  EpochRun* const run_;
  const StreamId id_;
  const std::string address_;
  grpc::ClientContext context_;
  ChunkAssembler assembler_;  // reads are serialized: only OnReadDone touches it
  grpc::GenericStub stub_;
  grpc::ByteBuffer read_buffer_;
  absl::Status failure_;  // set in OnReadDone, read in OnDone (after every reaction)
  bool draining_seen_ = false;
  std::atomic<bool> cancelled_by_us_{false};
  absl::Notification done_;

  absl::Mutex mu_;
  std::deque<grpc::ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer current_;  // the write in flight; touched only by whoever owns in_flight_
  bool in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // the hold is gone: no operation may start
};

EpochRun::EpochRun(const v1::SessionConfig& session, EpochPlan plan, ServerSet* servers, LocalProducer* local,
                   EpochRunOptions options, ClientMetrics* metrics)
    : session_(session),
      servers_(servers),
      local_(local),
      options_(std::move(options)),
      clock_(options_.clock ? options_.clock : SteadyClock::Get()),
      metrics_(metrics),
      scheduler_(std::move(plan), options_.scheduler, metrics, options_.meter) {
  OpenStreams();
  supervisor_ = std::thread([this] { Supervise(); });
}

EpochRun::~EpochRun() {
  stop_.Notify();
  supervisor_.join();
  std::vector<Stream*> streams;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, s] : streams_) streams.push_back(s.get());
  }
  for (Stream* s : streams) s->Cancel();
  for (Stream* s : streams) s->WaitDone();
  absl::MutexLock lock(&mu_);
  scheduler_.ReleaseGauges();  // what this epoch still held leaves the gauges with it
}

void EpochRun::OpenStreams() {
  std::vector<std::string> addresses = servers_ ? servers_->Addresses() : std::vector<std::string>();
  if (local_) addresses.push_back(kLocalProducer);
  std::vector<std::string> candidates;
  {
    absl::MutexLock lock(&mu_);
    candidates = scheduler_.OnMembership(addresses, clock_->Now());
  }
  // Open a stream only over a connected channel; asking for the state makes
  // the channel (re)connect in the background, with its own short backoff.
  std::vector<Stream*> opened;
  // A server has one candidate per stream it lacks, each on its own lane.
  for (const std::string& a : candidates) {
    if (local_ && a == kLocalProducer) {
      absl::MutexLock lock(&mu_);
      if (stop_.HasBeenNotified()) continue;
      const StreamId id = scheduler_.OnStreamOpened(a, clock_->Now());
      auto stream = std::make_unique<LocalStream>(this, id);
      opened.push_back(stream.get());
      streams_.emplace(id, std::move(stream));
      continue;
    }
    int lane;
    {
      absl::MutexLock lock(&mu_);
      lane = scheduler_.FreeLane(a);
    }
    std::shared_ptr<grpc::Channel> channel = servers_->Channel(a, lane);
    const grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
    // A further lane of a server whose first connection is up opens while its
    // own connection is still being made (the call waits for it), so that
    // all lanes start with the epoch rather than a supervisor tick later.
    const bool reachable = state == GRPC_CHANNEL_READY ||
                           (lane > 0 && state != GRPC_CHANNEL_TRANSIENT_FAILURE && state != GRPC_CHANNEL_SHUTDOWN &&
                            servers_->Channel(a, 0)->GetState(/*try_to_connect=*/false) == GRPC_CHANNEL_READY);
    absl::MutexLock lock(&mu_);
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) scheduler_.OnConnectFailed(a, "cannot connect");
    if (!reachable || stop_.HasBeenNotified()) continue;
    // A stream of a lower lane that ended meanwhile frees that lane, whose
    // channel was not checked: the next tick opens it.
    if (scheduler_.FreeLane(a) != lane) continue;
    v1::StreamRequest config;
    *config.mutable_config() = session_;
    const StreamId id = scheduler_.OnStreamOpened(a, clock_->Now());
    if (metrics_) metrics_->streams_opened->Increment();
    auto stream = std::make_unique<GrpcStream>(this, id, a, std::move(channel), Serialize(config));
    opened.push_back(stream.get());
    streams_.emplace(id, std::move(stream));
  }
  for (Stream* s : opened) s->Start();
  std::vector<Assignment> assignments;
  std::vector<StreamId> half_closes;
  {
    absl::MutexLock lock(&mu_);
    assignments = scheduler_.Dispatch(clock_->Now());
    half_closes = scheduler_.TakeHalfCloses();
  }
  Send(std::move(assignments), std::move(half_closes));
}

void EpochRun::Supervise() {
  absl::Time next_verdict = clock_->Now() + kVerdictInterval;
  absl::Time next_idle_check = absl::Now() + kIdleCheck;
  while (!stop_.WaitForNotificationWithTimeout(kSupervisorTick)) {
    if (servers_ && absl::Now() >= next_idle_check) {
      std::set<std::string> in_use;
      {
        absl::MutexLock lock(&mu_);
        for (std::string& a : scheduler_.ServersInUse()) in_use.insert(std::move(a));
      }
      servers_->CloseIdle(in_use, kIdleChannel);
      next_idle_check = absl::Now() + kIdleCheck;
    }
    if (options_.meter && clock_->Now() >= next_verdict) {
      options_.meter->Evaluate();  // updates stoker_client_bottleneck
      next_verdict = clock_->Now() + kVerdictInterval;
    }
    OpenStreams();
    std::vector<Stream*> to_cancel;
    std::vector<Assignment> assignments;
    std::vector<StreamId> half_closes;
    {
      absl::MutexLock lock(&mu_);
      for (StreamId id : scheduler_.Tick(clock_->Now())) to_cancel.push_back(streams_.at(id).get());
      assignments = scheduler_.Dispatch(clock_->Now());
      half_closes = scheduler_.TakeHalfCloses();
    }
    for (Stream* s : to_cancel) s->Cancel();
    Send(std::move(assignments), std::move(half_closes));
  }
}

void EpochRun::Send(std::vector<Assignment> assignments, std::vector<StreamId> half_closes) {
  if (assignments.empty() && half_closes.empty()) return;
  std::vector<std::pair<Stream*, v1::BatchRequest>> writes;
  std::vector<Stream*> closes;
  {
    absl::MutexLock lock(&mu_);
    for (const Assignment& a : assignments) {
      v1::BatchRequest req;
      req.set_epoch(a.epoch);
      req.set_batch_index(a.batch);
      for (int64_t i : scheduler_.SampleIndices(a.epoch, a.batch)) req.add_sample_indices(i);
      writes.emplace_back(streams_.at(a.stream).get(), std::move(req));
    }
    for (StreamId id : half_closes) closes.push_back(streams_.at(id).get());
  }
  // A write on a stream that is ending is dropped; the scheduler requests its
  // batches elsewhere when the stream's end is reported.
  for (auto& [stream, request] : writes) stream->Write(request);
  for (Stream* s : closes) s->HalfClose();
}

absl::Status EpochRun::CheckHeader(StreamId id, const v1::BatchHeader& header) {
  absl::MutexLock lock(&mu_);
  return scheduler_.CheckHeader(id, header);
}

absl::Status EpochRun::OnBatch(StreamId id, Batch batch) {
  std::vector<Assignment> assignments;
  std::vector<StreamId> half_closes;
  {
    absl::MutexLock lock(&mu_);
    absl::Status status = scheduler_.OnBatchReceived(id, std::move(batch), clock_->Now());
    if (!status.ok()) return status;
    assignments = scheduler_.Dispatch(clock_->Now());
    half_closes = scheduler_.TakeHalfCloses();
  }
  Send(std::move(assignments), std::move(half_closes));
  return absl::OkStatus();
}

void EpochRun::OnDraining(StreamId id) {
  std::vector<StreamId> half_closes;
  {
    absl::MutexLock lock(&mu_);
    scheduler_.OnDraining(id);
    half_closes = scheduler_.TakeHalfCloses();
  }
  Send({}, std::move(half_closes));
}

void EpochRun::OnStreamDone(StreamId id, const absl::Status& status, bool from_server, int64_t failed_batch,
                            int64_t failed_epoch, bool session_refused, absl::Duration retry_after) {
  if (stop_.HasBeenNotified()) return;  // our own cancellation at the end
  std::vector<Assignment> assignments;
  std::vector<StreamId> half_closes;
  {
    absl::MutexLock lock(&mu_);
    StreamEnd end = StreamEnd::Ended(status, from_server, failed_batch, failed_epoch);
    if (IsLocalOutOfMemory(status)) {
      end = StreamEnd::LocalFailure(status);
    } else if (session_refused && status.code() == absl::StatusCode::kResourceExhausted &&
               retry_after > absl::ZeroDuration()) {
      end = StreamEnd::ServerFull(status, retry_after);
    } else if (session_refused) {
      end = StreamEnd::SessionRefused(status);
    }
    scheduler_.OnStreamEnded(id, end, clock_->Now());
    assignments = scheduler_.Dispatch(clock_->Now());
    half_closes = scheduler_.TakeHalfCloses();
  }
  Send(std::move(assignments), std::move(half_closes));
}

absl::Status EpochRun::Next(Batch* batch, bool* end_of_epoch) {
  const absl::Time start = clock_->Now();
  std::vector<Assignment> assignments;
  std::vector<StreamId> half_closes;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](BatchScheduler* s) { return s->CanTake(); }, &scheduler_));
    absl::Status status = scheduler_.Take(batch, end_of_epoch);
    if (*end_of_epoch && options_.meter) options_.meter->demand().Pause();  // between epochs is no step
    if (Fanout* fanout = scheduler_.fanout(); fanout != nullptr && status.ok() && !*end_of_epoch) {
      fanout->OnWait(clock_->Now() - start);  // its starvation signal
    }
    if (!status.ok() || *end_of_epoch) return status;
    assignments = scheduler_.Dispatch(clock_->Now());
    half_closes = scheduler_.TakeHalfCloses();
  }
  Send(std::move(assignments), std::move(half_closes));
  const absl::Duration waited = clock_->Now() - start;
  if (metrics_) metrics_->wait_seconds->Observe(absl::ToDoubleSeconds(waited));
  if (options_.meter) {
    options_.meter->OnWait(waited);
    options_.meter->demand().OnNext(start, start + waited, static_cast<int64_t>(batch->sample_indices.size()));
  }
  return absl::OkStatus();
}

absl::Status EpochRun::Arm(EpochPlan plan) {
  std::vector<Assignment> assignments;
  std::vector<StreamId> half_closes;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = scheduler_.ArmEpoch(std::move(plan)); !s.ok()) return s;
    assignments = scheduler_.Dispatch(clock_->Now());
    half_closes = scheduler_.TakeHalfCloses();
  }
  Send(std::move(assignments), std::move(half_closes));
  return absl::OkStatus();
}

absl::Status EpochRun::Advance() {
  absl::MutexLock lock(&mu_);
  return scheduler_.AdvanceEpoch();
}

bool EpochRun::CanAdvance() const {
  absl::MutexLock lock(&mu_);
  return scheduler_.CanAdvance();
}

int64_t EpochRun::epoch() const {
  absl::MutexLock lock(&mu_);
  return scheduler_.epoch();
}

int EpochRun::prefetch() const {
  absl::MutexLock lock(&mu_);
  return scheduler_.prefetch();
}

int64_t EpochRun::last_armed_epoch() const {
  absl::MutexLock lock(&mu_);
  return scheduler_.last_armed_epoch();
}

void EpochRun::Position(int64_t* next, std::vector<int64_t>* beyond) const {
  absl::MutexLock lock(&mu_);
  scheduler_.Position(next, beyond);
}

}  // namespace stoker
