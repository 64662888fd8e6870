#include "server/data_service.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "server/chunk_encoder.h"

namespace stoker {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

namespace {

// A well-behaved client keeps a few batches outstanding per stream; this
// bounds what one stream can make the server hold.
constexpr int kMaxOutstandingBatches = 64;

class BatchStreamReactor;

}  // namespace

// The open streams, so that shutdown can tell each to drain. Thread-safe.
class StreamRegistry {
 public:
  void Add(BatchStreamReactor* r) {
    absl::MutexLock lock(&mu_);
    live_.insert(r);
    if (draining_) DrainOne(r);
  }
  void Remove(BatchStreamReactor* r) {
    absl::MutexLock lock(&mu_);
    live_.erase(r);
  }
  void DrainAll() {
    absl::MutexLock lock(&mu_);
    draining_ = true;
    for (BatchStreamReactor* r : live_) DrainOne(r);
  }

 private:
  static void DrainOne(BatchStreamReactor* r);
  absl::Mutex mu_;
  std::set<BatchStreamReactor*> live_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
};

namespace {

// One BatchStream call. Reads run on gRPC threads and only validate and
// schedule; batches complete on worker threads and are queued for writing,
// one write in flight at a time. The reactor deletes itself in OnDone, which
// gRPC calls only after Finish, and Finish is called only once no sample task
// of this stream is outstanding, so worker callbacks never outlive it.
class BatchStreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  BatchStreamReactor(DataServiceCore* core, StreamRegistry* registry) : core_(core), registry_(registry) {
    core_->metrics().streams->Increment();
    StartRead(&request_buffer_);
    registry_->Add(this);
  }

  // Queues a `draining` chunk for the client. Called with the registry's lock
  // held, so the reactor cannot be deleted meanwhile.
  void Drain() {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      if (drain_sent_ || broken_ || finished_) return;
      drain_sent_ = true;
      v1::BatchChunk notice;
      notice.set_draining(true);
      Outgoing& out = outgoing_.emplace_back();
      out.chunk = EncodeChunk(notice, std::make_shared<const std::string>(), 0, 0);
      next = Decide();
    }
    Act(next);
  }

  void OnReadDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      // The stream is ending (a batch failed, or Finish already ran): take no
      // more work and read no more.
      if (!error_.ok() || finished_) ok = false;
    }
    if (!ok) {  // client half-closed, or the call is gone
      Next next;
      {
        absl::MutexLock lock(&mu_);
        reads_done_ = true;
        next = Decide();
      }
      return Act(next);
    }
    absl::Status status = HandleRequest();
    if (status.ok()) return StartRead(&request_buffer_);
    LOG(WARNING) << "BatchStream refused a request: " << status;
    Next next;
    {
      absl::MutexLock lock(&mu_);
      if (error_.ok()) error_ = status;
      reads_done_ = true;  // no further reads: the stream ends with the error
      next = Decide();
    }
    Act(next);
  }

  void OnWriteDone(bool ok) override {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      write_in_flight_ = false;
      Outgoing& sent = outgoing_.front();
      if (ok) {
        core_->metrics().sent_bytes->Increment(static_cast<double>(sent.payload_bytes));
        if (sent.last_of_batch) {
          core_->metrics().Batches(cache_mode_).Increment();
          core_->metrics().send_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - sent.ready_time));
        }
      } else {
        broken_ = true;
      }
      if (sent.last_of_batch) core_->metrics().inflight_batches->Decrement();
      outgoing_.pop_front();
      if (broken_) DropOutgoing();
      next = Decide();
    }
    Act(next);
  }

  void OnCancel() override {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      if (session_) session_->Cancel();
      broken_ = true;
      if (!write_in_flight_) DropOutgoing();
      next = Decide();
    }
    Act(next);
  }

  void OnDone() override {
    registry_->Remove(this);
    core_->metrics().streams->Decrement();
    delete this;
  }

 private:
  struct Outgoing {
    grpc::ByteBuffer chunk;  // an encoded BatchChunk
    size_t payload_bytes = 0;
    bool last_of_batch = false;
    absl::Time ready_time;
  };

  // What to do once mu_ is released: at most one of a write and Finish.
  struct Next {
    const grpc::ByteBuffer* write = nullptr;
    std::optional<grpc::Status> finish;
  };

  absl::Status HandleRequest() {
    request_.Clear();
    grpc::Status parsed = grpc::SerializationTraits<v1::StreamRequest>::Deserialize(&request_buffer_, &request_);
    if (!parsed.ok()) return absl::InvalidArgumentError("StreamRequest does not parse: " + parsed.error_message());
    if (request_.has_config()) {
      {
        absl::MutexLock lock(&mu_);
        if (session_) return absl::InvalidArgumentError("config sent twice on one stream");
      }
      absl::StatusOr<std::unique_ptr<BatchSession>> session = core_->StartSession(request_.config());
      if (!session.ok()) return session.status();
      absl::MutexLock lock(&mu_);
      session_ = *std::move(session);
      cache_mode_ = session_->cache_mode();
      if (broken_) session_->Cancel();  // OnCancel ran while it was being made
      return absl::OkStatus();
    }
    if (!request_.has_batch()) return absl::InvalidArgumentError("empty StreamRequest: set config or batch");
    BatchSession* session;
    {
      absl::MutexLock lock(&mu_);
      session = session_.get();
      if (!session) return absl::InvalidArgumentError("the first message of a BatchStream must be the config");
      if (outstanding_ >= kMaxOutstandingBatches) {
        return absl::ResourceExhaustedError(absl::StrCat("more than ", kMaxOutstandingBatches,
                                                         " batches requested and not yet finished on one stream"));
      }
      ++outstanding_;
    }
    absl::Status status = session->Submit(request_.batch(), [this](FinishedBatch b) { OnBatch(std::move(b)); });
    if (!status.ok()) {
      absl::MutexLock lock(&mu_);
      --outstanding_;
    }
    return status;
  }

  // Worker thread: queue the batch's chunks for writing.
  void OnBatch(FinishedBatch batch) {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      --outstanding_;
      if (!batch.status.ok() && error_.ok()) {
        LOG(WARNING) << "batch " << batch.header.batch_index() << " failed: " << batch.status;
        error_ = batch.status;
        reads_done_ = true;  // OnReadDone takes no more requests
      }
      if (broken_ || !batch.status.ok()) {
        core_->metrics().inflight_batches->Decrement();
      } else {
        Enqueue(batch);
      }
      next = Decide();
    }
    Act(next);
  }

  void Enqueue(FinishedBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t total = batch.data->size();
    const size_t chunk = static_cast<size_t>(std::max<int64_t>(1, core_->chunk_bytes()));
    for (size_t offset = 0; offset < total || offset == 0; offset += chunk) {
      v1::BatchChunk fields;  // everything but the payload
      if (offset == 0) *fields.mutable_header() = batch.header;
      fields.set_batch_index(batch.header.batch_index());
      fields.set_offset(static_cast<int64_t>(offset));
      Outgoing& out = outgoing_.emplace_back();
      out.payload_bytes = std::min(chunk, total - offset);
      out.chunk = EncodeChunk(fields, batch.data, offset, out.payload_bytes);  // no copy of the payload
      out.last_of_batch = offset + chunk >= total;
      out.ready_time = batch.ready_time;
      if (total == 0) break;
    }
  }

  void DropOutgoing() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const Outgoing& o : outgoing_) {
      if (o.last_of_batch) core_->metrics().inflight_batches->Decrement();
    }
    outgoing_.clear();
  }

  Next Decide() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Next next;
    if (finished_ || write_in_flight_) return next;
    if (!outgoing_.empty() && !broken_) {
      write_in_flight_ = true;
      next.write = &outgoing_.front().chunk;  // stable until OnWriteDone
      return next;
    }
    if (!reads_done_ || outstanding_ > 0) return next;
    finished_ = true;
    next.finish = broken_ && error_.ok() ? grpc::Status::CANCELLED : ToGrpcStatus(error_);
    return next;
  }

  // gRPC may run reactions inline, so StartWrite and Finish are called with
  // mu_ released; the flags set in Decide keep them exclusive. Finish may
  // delete this (OnDone): nothing is touched after it.
  void Act(const Next& next) {
    if (next.write) StartWrite(next.write);
    if (next.finish) Finish(*next.finish);
  }

  DataServiceCore* const core_;
  StreamRegistry* const registry_;
  grpc::ByteBuffer request_buffer_;  // only the read path touches these
  v1::StreamRequest request_;

  absl::Mutex mu_;
  std::unique_ptr<BatchSession> session_ ABSL_GUARDED_BY(mu_);
  std::deque<Outgoing> outgoing_ ABSL_GUARDED_BY(mu_);
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;  // batches submitted, not yet queued
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // cancelled or a write failed
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool drain_sent_ ABSL_GUARDED_BY(mu_) = false;
  int cache_mode_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

void StreamRegistry::DrainOne(BatchStreamReactor* r) { r->Drain(); }

DataServiceImpl::DataServiceImpl(DataServiceCore* core) : core_(core), streams_(std::make_unique<StreamRegistry>()) {}

DataServiceImpl::~DataServiceImpl() = default;

void DataServiceImpl::Drain() { streams_->DrainAll(); }

grpc::ServerUnaryReactor* DataServiceImpl::OpenSession(grpc::CallbackServerContext* context,
                                                       const v1::OpenSessionRequest* request,
                                                       v1::OpenSessionResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<v1::OpenSessionResponse> result = core_->OpenSession(request->config());
  if (result.ok()) {
    *response = *std::move(result);
  } else {
    LOG(INFO) << "OpenSession refused: " << result.status();
  }
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* DataServiceImpl::BatchStream(
    grpc::CallbackServerContext* /*context*/) {
  return new BatchStreamReactor(core_, streams_.get());
}

}  // namespace stoker
