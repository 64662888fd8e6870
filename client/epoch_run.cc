#include "client/epoch_run.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "client/chunk_assembler.h"
#include "glog/logging.h"

namespace stoker {

// BatchStream's full method name. Load-bearing: must match stoker.proto.
constexpr char kBatchStreamMethod[] = "/stoker.v1.DataService/BatchStream";

struct EpochRun::Stream {
  std::string address;
  grpc::ClientContext context;
  // Requests go out as messages; chunks come in as raw bytes, which the
  // assembler parses without an intermediate copy of the payload.
  std::unique_ptr<grpc::ClientReaderWriter<v1::StreamRequest, grpc::ByteBuffer>> rpc;
  std::thread reader;
  absl::Mutex write_mu;  // one writer at a time; the reader thread reads
  bool writes_done ABSL_GUARDED_BY(write_mu) = false;
  // Guarded by EpochRun::mu_: batches requested on this stream, not received.
  std::set<int64_t> requested;
  int outstanding() const { return static_cast<int>(requested.size()); }
};

EpochRun::EpochRun(const v1::SessionConfig& session, EpochPlan plan,
                   const std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>>& servers,
                   EpochRunOptions options, ClientMetrics* metrics)
    : plan_(std::move(plan)), options_(options), metrics_(metrics) {
  v1::StreamRequest config;
  *config.mutable_config() = session;
  for (const auto& [address, channel] : servers) {
    auto s = std::make_unique<Stream>();
    s->address = address;
    s->context.set_deadline(absl::ToChronoTime(absl::Now() + options_.stream_timeout));
    // What the generated stub does, with a raw reader type.
    s->rpc.reset(grpc::internal::ClientReaderWriterFactory<v1::StreamRequest, grpc::ByteBuffer>::Create(
        channel.get(), grpc::internal::RpcMethod(kBatchStreamMethod, grpc::internal::RpcMethod::BIDI_STREAMING, channel),
        &s->context));
    s->rpc->Write(config);  // a failure surfaces as the stream's status in ReadLoop
    streams_.push_back(std::move(s));
  }
  for (auto& s : streams_) s->reader = std::thread([this, p = s.get()] { ReadLoop(p); });
  std::vector<Request> requests;
  {
    absl::MutexLock lock(&mu_);
    requests = Dispatch();
  }
  Send(std::move(requests));
}

EpochRun::~EpochRun() {
  stopping_.store(true);
  for (auto& s : streams_) s->context.TryCancel();
  for (auto& s : streams_) s->reader.join();
  if (metrics_) {
    absl::MutexLock lock(&mu_);
    metrics_->buffered_batches->Decrement(static_cast<double>(ready_.size()));
    metrics_->inflight_batches->Decrement(static_cast<double>(in_flight_));
  }
}

std::vector<EpochRun::Request> EpochRun::Dispatch() {
  std::vector<Request> requests;
  while (next_to_dispatch_ < plan_.num_batches() &&
         in_flight_ + static_cast<int64_t>(ready_.size()) < options_.prefetch) {
    // The least-loaded stream with room in its window: fast servers return
    // batches sooner, so they are asked more often.
    Stream* best = nullptr;
    for (auto& s : streams_) {
      if (s->outstanding() < options_.window && (!best || s->outstanding() < best->outstanding())) best = s.get();
    }
    if (!best) break;
    Request& r = requests.emplace_back();
    r.stream = best;
    v1::BatchRequest* b = r.message.mutable_batch();
    b->set_epoch(plan_.epoch());
    b->set_batch_index(next_to_dispatch_);
    for (int64_t i : plan_.BatchIndices(next_to_dispatch_)) b->add_sample_indices(i);
    requested_at_[next_to_dispatch_] = absl::Now();
    best->requested.insert(next_to_dispatch_);
    ++in_flight_;
    ++next_to_dispatch_;
    if (metrics_) metrics_->inflight_batches->Increment();
  }
  return requests;
}

void EpochRun::Send(std::vector<Request> requests) {
  for (Request& r : requests) {
    absl::MutexLock lock(&r.stream->write_mu);
    if (!r.stream->writes_done) r.stream->rpc->Write(r.message);
  }
  bool all_dispatched;
  {
    absl::MutexLock lock(&mu_);
    all_dispatched = next_to_dispatch_ >= plan_.num_batches();
  }
  if (!all_dispatched) return;
  for (auto& s : streams_) {
    absl::MutexLock lock(&s->write_mu);
    if (!s->writes_done) {
      s->writes_done = true;
      s->rpc->WritesDone();
    }
  }
}

void EpochRun::ReadLoop(Stream* stream) {
  ChunkAssembler assembler(stream->address, pool_);
  grpc::ByteBuffer buffer;
  while (stream->rpc->Read(&buffer)) {
    const size_t bytes = buffer.Length();
    absl::StatusOr<std::optional<Batch>> batch = assembler.Add(&buffer);
    if (!batch.ok()) {
      absl::MutexLock lock(&mu_);
      if (error_.ok()) error_ = batch.status();
      stream->context.TryCancel();
      break;
    }
    if (metrics_) metrics_->received_bytes->Increment(static_cast<double>(bytes));
    if (!batch->has_value()) continue;
    absl::StatusOr<std::vector<Request>> requests = OnBatchReceived(stream, **std::move(batch));
    if (!requests.ok()) {
      absl::MutexLock lock(&mu_);
      if (error_.ok()) error_ = requests.status();
      stream->context.TryCancel();
      break;
    }
    Send(*std::move(requests));
  }
  grpc::Status status = stream->rpc->Finish();
  absl::MutexLock lock(&mu_);
  if (stopping_.load()) return;  // our own cancellation
  if (!status.ok() && error_.ok()) {
    error_ = absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat("server ", stream->address, ": ", status.error_message()));
  } else if (status.ok() && stream->outstanding() > 0 && error_.ok()) {
    error_ = absl::DataLossError(absl::StrCat("server ", stream->address, " closed the stream with ",
                                              stream->outstanding(), " batches outstanding"));
  }
}

absl::StatusOr<std::vector<EpochRun::Request>> EpochRun::OnBatchReceived(Stream* stream, Batch batch) {
  absl::MutexLock lock(&mu_);
  if (batch.epoch != plan_.epoch() || stream->requested.erase(batch.batch_index) == 0) {
    return absl::DataLossError(absl::StrCat("server ", stream->address, " sent batch ", batch.batch_index, " of epoch ",
                                            batch.epoch, ", which was not requested from it"));
  }
  const int64_t expected = static_cast<int64_t>(plan_.BatchIndices(batch.batch_index).size());
  if (static_cast<int64_t>(batch.sample_indices.size()) != expected ||
      static_cast<int64_t>(batch.data.size()) != expected * options_.sample_bytes) {
    return absl::DataLossError(absl::StrCat("server ", stream->address, " sent batch ", batch.batch_index, " with ",
                                            batch.sample_indices.size(), " samples in ", batch.data.size(),
                                            " bytes; expected ", expected, " x ", options_.sample_bytes));
  }
  auto it = requested_at_.find(batch.batch_index);
  if (it != requested_at_.end()) {
    batch.receive_latency = absl::Now() - it->second;
    requested_at_.erase(it);
  }
  --in_flight_;
  if (metrics_) {
    metrics_->batches->Increment();
    metrics_->inflight_batches->Decrement();
    metrics_->buffered_batches->Increment();
    metrics_->receive_latency_seconds->Observe(absl::ToDoubleSeconds(batch.receive_latency));
    metrics_->failed_samples->Increment(static_cast<double>(batch.failed_samples.size()));
  }
  const int64_t index = batch.batch_index;
  ready_.emplace(index, std::move(batch));
  return Dispatch();
}

absl::Status EpochRun::Next(Batch* batch, bool* end_of_epoch) {
  const absl::Time start = absl::Now();
  std::vector<Request> requests;
  {
    absl::MutexLock lock(&mu_);
    *end_of_epoch = false;
    if (next_to_deliver_ >= plan_.num_batches()) {
      *end_of_epoch = true;
      return absl::OkStatus();
    }
    auto available = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !error_.ok() || ready_.count(next_to_deliver_) > 0;
    };
    mu_.Await(absl::Condition(&available));
    auto it = ready_.find(next_to_deliver_);
    if (it == ready_.end()) return error_;
    *batch = std::move(it->second);
    ready_.erase(it);
    ++next_to_deliver_;
    if (metrics_) metrics_->buffered_batches->Decrement();
    requests = Dispatch();
  }
  Send(std::move(requests));
  if (metrics_) metrics_->wait_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - start));
  return absl::OkStatus();
}

}  // namespace stoker
