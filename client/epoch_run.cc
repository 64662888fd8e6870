#include "client/epoch_run.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/chunk_assembler.h"
#include "glog/logging.h"

namespace stoker {

// BatchStream's full method name. Load-bearing: must match stoker.proto.
constexpr char kBatchStreamMethod[] = "/stoker.v1.DataService/BatchStream";
constexpr absl::Duration kSupervisorTick = absl::Milliseconds(100);
constexpr absl::Duration kVerdictInterval = absl::Seconds(2);
// A stream that has stayed open this long counts as a live server even before
// its first batch (for the unavailable timeout); one that fails sooner does not.
constexpr absl::Duration kProvenAfter = absl::Seconds(2);

struct EpochRun::Stream {
  std::string address;
  grpc::ClientContext context;
  // Requests go out as messages; chunks come in as raw bytes, which the
  // assembler parses without an intermediate copy of the payload.
  std::unique_ptr<grpc::ClientReaderWriter<v1::StreamRequest, grpc::ByteBuffer>> rpc;
  std::thread reader;
  absl::Mutex write_mu;  // one writer at a time; the reader thread reads
  bool writes_done ABSL_GUARDED_BY(write_mu) = false;
  // Guarded by EpochRun::mu_:
  std::set<int64_t> requested;  // requested here, not yet received
  bool retired = false;         // ended or given up: gets no work
  bool draining = false;        // the server is shutting down: gets no new work
  bool half_closed = false;
  absl::Time opened;            // a stream proves its server alive by delivering
  bool delivered = false;       // a batch, or by staying up for kProvenAfter
};

EpochRun::EpochRun(const v1::SessionConfig& session, EpochPlan plan, ServerSet* servers, EpochRunOptions options,
                   ClientMetrics* metrics)
    : session_(session), plan_(std::move(plan)), servers_(servers), options_(std::move(options)), metrics_(metrics) {
  {
    absl::MutexLock lock(&mu_);
    for (int64_t b = 0; b < plan_.num_batches(); ++b) {
      if (options_.already_delivered.count(b)) {
        delivered_.insert(b);
      } else {
        pending_.insert(b);
      }
    }
    while (delivered_.count(next_to_deliver_)) ++next_to_deliver_;
  }
  OpenStreams();
  supervisor_ = std::thread([this] { Supervise(); });
}

EpochRun::~EpochRun() {
  stop_.Notify();
  supervisor_.join();
  std::vector<Stream*> streams;
  {
    absl::MutexLock lock(&mu_);
    for (auto& s : streams_) streams.push_back(s.get());
    if (metrics_) {
      metrics_->buffered_batches->Decrement(static_cast<double>(ready_.size()));
      metrics_->inflight_batches->Decrement(static_cast<double>(assigned_.size()));
    }
  }
  for (Stream* s : streams) s->context.TryCancel();
  for (Stream* s : streams) {
    if (s->reader.joinable()) s->reader.join();
  }
}

void EpochRun::OpenStreams() {
  const std::vector<std::string> addresses = servers_->Addresses();
  std::vector<std::string> candidates, to_open;
  {
    absl::MutexLock lock(&mu_);
    if (Done() || !error_.ok()) return;
    const absl::Time now = absl::Now();
    for (const std::string& a : addresses) {
      ServerState& state = server_state_[a];
      if (!state.live && now >= state.retry_at) candidates.push_back(a);
    }
  }
  // Open a stream only over a connected channel; asking for the state makes
  // the channel (re)connect in the background, with its own short backoff.
  for (const std::string& a : candidates) {
    const grpc_connectivity_state state = servers_->Channel(a)->GetState(/*try_to_connect=*/true);
    if (state == GRPC_CHANNEL_READY) {
      to_open.push_back(a);
    } else if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
      absl::MutexLock lock(&mu_);
      if (server_state_[a].last_error.empty()) server_state_[a].last_error = "cannot connect";
    }
  }
  {
    absl::MutexLock lock(&mu_);
    // Servers that left the set (DNS) are drained: no new work.
    for (auto& [address, state] : server_state_) {
      if (state.live && !std::binary_search(addresses.begin(), addresses.end(), address)) {
        state.live->draining = true;
        MaybeHalfClose(state.live);
      }
    }
  }
  v1::StreamRequest config;
  *config.mutable_config() = session_;
  for (const std::string& address : to_open) {
    auto s = std::make_unique<Stream>();
    s->address = address;
    s->opened = absl::Now();
    s->context.set_deadline(absl::ToChronoTime(absl::Now() + options_.stream_timeout));
    std::shared_ptr<grpc::Channel> channel = servers_->Channel(address);
    // What the generated stub does, with a raw reader type. Fails fast (not
    // wait-for-ready) when the server is down; ReadLoop then retires it.
    s->rpc.reset(grpc::internal::ClientReaderWriterFactory<v1::StreamRequest, grpc::ByteBuffer>::Create(
        channel.get(), grpc::internal::RpcMethod(kBatchStreamMethod, grpc::internal::RpcMethod::BIDI_STREAMING, channel),
        &s->context));
    s->rpc->Write(config);
    Stream* stream = s.get();
    {
      absl::MutexLock lock(&mu_);
      server_state_[address].live = stream;
      streams_.push_back(std::move(s));
    }
    stream->reader = std::thread([this, stream] { ReadLoop(stream); });
  }
  std::vector<Request> requests;
  {
    absl::MutexLock lock(&mu_);
    requests = Dispatch();
  }
  Send(std::move(requests));
}

void EpochRun::Supervise() {
  absl::Time next_verdict = absl::Now() + kVerdictInterval;
  while (!stop_.WaitForNotificationWithTimeout(kSupervisorTick)) {
    if (options_.meter && absl::Now() >= next_verdict) {
      options_.meter->Evaluate();  // updates stoker_client_bottleneck
      next_verdict = absl::Now() + kVerdictInterval;
    }
    OpenStreams();
    std::vector<Stream*> to_cancel;
    std::vector<Request> requests;
    {
      absl::MutexLock lock(&mu_);
      const absl::Time now = absl::Now();
      // A batch outstanding too long: give its stream up.
      for (const auto& [b, at] : requested_at_) {
        if (now - at > options_.batch_timeout) {
          Stream* s = assigned_.at(b);
          to_cancel.push_back(s);
          Retire(s, absl::DeadlineExceededError(absl::StrCat("batch ", b, " took longer than ",
                                                             absl::FormatDuration(options_.batch_timeout))));
          break;  // requested_at_ changed; look again next tick
        }
      }
      int live = 0;
      for (const auto& [address, state] : server_state_) {
        const Stream* s = state.live;
        live += s && !s->draining && (s->delivered || now - s->opened >= kProvenAfter);
      }
      if (Done() || live > 0) {
        no_server_since_ = absl::InfiniteFuture();
      } else if (no_server_since_ == absl::InfiniteFuture()) {
        no_server_since_ = now;
      } else if (now - no_server_since_ > options_.unavailable_timeout && error_.ok()) {
        std::vector<std::string> why;
        for (const auto& [address, state] : server_state_) {
          why.push_back(absl::StrCat(address, " (", state.last_error.empty() ? "draining" : state.last_error, ")"));
        }
        error_ = absl::UnavailableError(absl::StrCat("no data server answered for ",
                                                     absl::FormatDuration(options_.unavailable_timeout), ": ",
                                                     absl::StrJoin(why, ", ")));
        LOG(ERROR) << error_;
      }
      requests = Dispatch();
    }
    for (Stream* s : to_cancel) s->context.TryCancel();
    Send(std::move(requests));
  }
}

void EpochRun::Retire(Stream* stream, const absl::Status& status) {
  if (stream->retired) return;
  stream->retired = true;
  ServerState& state = server_state_[stream->address];
  if (state.live == stream) state.live = nullptr;
  for (int64_t b : stream->requested) {
    assigned_.erase(b);
    requested_at_.erase(b);
    pending_.insert(b);  // asked again from the others; same content
    if (metrics_) {
      metrics_->reassigned_batches->Increment();
      metrics_->inflight_batches->Decrement();
    }
  }
  const size_t lost = stream->requested.size();
  stream->requested.clear();
  if (status.ok()) {
    state.failures = 0;
    state.retry_at = absl::Now();
    return;
  }
  ++state.failures;
  state.last_error = std::string(status.message());
  // Exponential backoff with jitter: min x 2^(failures - 1), capped, times
  // a uniform factor in [0.5, 1).
  static thread_local std::mt19937_64 jitter{std::random_device{}()};
  absl::Duration backoff = options_.reconnect_min * (1 << std::min(state.failures - 1, 16));
  // Refusals that a retry will not change wait the longest.
  const absl::StatusCode code = status.code();
  if (code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
      code == absl::StatusCode::kPermissionDenied || code == absl::StatusCode::kFailedPrecondition) {
    backoff = options_.reconnect_max;
  }
  backoff = std::min(backoff, options_.reconnect_max) * (0.5 + 0.5 * std::uniform_real_distribution<>(0, 1)(jitter));
  state.retry_at = absl::Now() + backoff;
  if (metrics_) metrics_->ServerFailures(stream->address).Increment();
  if (state.failures == 1 || lost > 0) {
    LOG(WARNING) << "server " << stream->address << " failed (" << status << "); " << lost
                 << " batches go to other servers; retrying in " << absl::FormatDuration(backoff);
  }
}

void EpochRun::ReadLoop(Stream* stream) {
  ChunkAssembler assembler(stream->address, options_.buffers);
  grpc::ByteBuffer buffer;
  absl::Status failure;
  while (stream->rpc->Read(&buffer)) {
    const size_t bytes = buffer.Length();
    absl::StatusOr<std::optional<Batch>> batch = assembler.Add(&buffer);
    if (!batch.ok()) {
      failure = batch.status();
      break;
    }
    if (metrics_) metrics_->received_bytes->Increment(static_cast<double>(bytes));
    if (assembler.draining()) {
      absl::MutexLock lock(&mu_);
      if (!stream->draining) LOG(INFO) << "server " << stream->address << " is draining: no new work for it";
      stream->draining = true;
      MaybeHalfClose(stream);
    }
    if (!batch->has_value()) continue;
    absl::StatusOr<std::vector<Request>> requests = OnBatchReceived(stream, **std::move(batch));
    if (!requests.ok()) {
      failure = requests.status();
      break;
    }
    Send(*std::move(requests));
  }
  if (!failure.ok()) stream->context.TryCancel();
  const grpc::Status status = stream->rpc->Finish();
  if (stop_.HasBeenNotified()) return;  // our own cancellation
  std::vector<Request> requests;
  {
    absl::MutexLock lock(&mu_);
    if (failure.ok() && !status.ok()) {
      failure = absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
    }
    if (failure.ok() && !stream->requested.empty()) {
      failure = absl::DataLossError(absl::StrCat("stream closed with ", stream->requested.size(), " batches outstanding"));
    }
    Retire(stream, failure);
    requests = Dispatch();
  }
  Send(std::move(requests));
}

absl::StatusOr<std::vector<EpochRun::Request>> EpochRun::OnBatchReceived(Stream* stream, Batch batch) {
  absl::MutexLock lock(&mu_);
  if (batch.epoch != plan_.epoch() || stream->requested.count(batch.batch_index) == 0) {
    return absl::DataLossError(absl::StrCat("sent batch ", batch.batch_index, " of epoch ", batch.epoch,
                                            ", which was not requested from it"));
  }
  const int64_t expected = static_cast<int64_t>(plan_.BatchIndices(batch.batch_index).size());
  if (static_cast<int64_t>(batch.sample_indices.size()) != expected ||
      static_cast<int64_t>(batch.data.size()) != expected * options_.sample_bytes) {
    return absl::DataLossError(absl::StrCat("sent batch ", batch.batch_index, " with ", batch.sample_indices.size(),
                                            " samples in ", batch.data.size(), " bytes; expected ", expected, " x ",
                                            options_.sample_bytes));
  }
  const int64_t b = batch.batch_index;
  stream->delivered = true;
  stream->requested.erase(b);
  assigned_.erase(b);
  auto it = requested_at_.find(b);
  if (it != requested_at_.end()) {
    batch.receive_latency = absl::Now() - it->second;
    requested_at_.erase(it);
  }
  if (options_.meter) options_.meter->OnBatch(batch.stage_times, batch.receive_latency);
  if (metrics_) {
    metrics_->batches->Increment();
    metrics_->ServerBatches(stream->address).Increment();
    metrics_->inflight_batches->Decrement();
    metrics_->buffered_batches->Increment();
    metrics_->receive_latency_seconds->Observe(absl::ToDoubleSeconds(batch.receive_latency));
    metrics_->failed_samples->Increment(static_cast<double>(batch.failed_samples.size()));
  }
  ready_.emplace(b, std::move(batch));
  if (Done()) {
    for (auto& s : streams_) MaybeHalfClose(s.get());
  } else {
    MaybeHalfClose(stream);
  }
  return Dispatch();
}

bool EpochRun::Done() const {
  return static_cast<int64_t>(delivered_.size() + ready_.size()) >= plan_.num_batches();
}

void EpochRun::MaybeHalfClose(Stream* stream) {
  if (stream->half_closed || stream->retired || !stream->requested.empty()) return;
  if (!stream->draining && !Done()) return;
  stream->half_closed = true;
  absl::MutexLock lock(&stream->write_mu);
  if (!stream->writes_done) {
    stream->writes_done = true;
    stream->rpc->WritesDone();
  }
}

std::vector<EpochRun::Request> EpochRun::Dispatch() {
  std::vector<Request> requests;
  if (!error_.ok()) return requests;
  while (!pending_.empty()) {
    const int64_t b = *pending_.begin();
    // The batch the caller waits for is always requested, whatever the limit.
    const bool head = options_.ordered && b == next_to_deliver_;
    if (!head && static_cast<int64_t>(assigned_.size() + ready_.size()) >= options_.prefetch) break;
    // The least-loaded live stream with room: fast servers return batches
    // sooner, so they are asked more often.
    Stream* best = nullptr;
    for (auto& [address, state] : server_state_) {
      Stream* s = state.live;
      if (!s || s->retired || s->draining || s->half_closed) continue;
      if (static_cast<int>(s->requested.size()) >= options_.window) continue;
      if (!best || s->requested.size() < best->requested.size()) best = s;
    }
    if (!best) break;
    pending_.erase(pending_.begin());
    best->requested.insert(b);
    assigned_[b] = best;
    requested_at_[b] = absl::Now();
    Request& r = requests.emplace_back();
    r.stream = best;
    v1::BatchRequest* req = r.message.mutable_batch();
    req->set_epoch(plan_.epoch());
    req->set_batch_index(b);
    for (int64_t i : plan_.BatchIndices(b)) req->add_sample_indices(i);
    if (metrics_) metrics_->inflight_batches->Increment();
  }
  return requests;
}

void EpochRun::Send(std::vector<Request> requests) {
  for (Request& r : requests) {
    absl::MutexLock lock(&r.stream->write_mu);
    // A failed write means the stream is ending; its reader retires it and
    // the batch is requested elsewhere.
    if (!r.stream->writes_done) r.stream->rpc->Write(r.message);
  }
}

absl::Status EpochRun::Next(Batch* batch, bool* end_of_epoch) {
  const absl::Time start = absl::Now();
  std::vector<Request> requests;
  {
    absl::MutexLock lock(&mu_);
    *end_of_epoch = false;
    if (static_cast<int64_t>(delivered_.size()) >= plan_.num_batches()) {
      *end_of_epoch = true;
      return absl::OkStatus();
    }
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !error_.ok() || (options_.ordered ? ready_.count(next_to_deliver_) > 0 : !ready_.empty());
    };
    mu_.Await(absl::Condition(&available));
    auto it = options_.ordered ? ready_.find(next_to_deliver_) : ready_.begin();
    if (it == ready_.end()) return error_;
    *batch = std::move(it->second);
    delivered_.insert(it->first);
    ready_.erase(it);
    while (delivered_.count(next_to_deliver_)) ++next_to_deliver_;
    if (metrics_) metrics_->buffered_batches->Decrement();
    requests = Dispatch();
  }
  Send(std::move(requests));
  const absl::Duration waited = absl::Now() - start;
  if (metrics_) metrics_->wait_seconds->Observe(absl::ToDoubleSeconds(waited));
  if (options_.meter) options_.meter->OnWait(waited);
  return absl::OkStatus();
}

void EpochRun::Position(int64_t* next, std::vector<int64_t>* beyond) const {
  absl::MutexLock lock(&mu_);
  *next = next_to_deliver_;
  beyond->assign(delivered_.upper_bound(next_to_deliver_), delivered_.end());
}

}  // namespace stoker
