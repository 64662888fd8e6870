#include "server/data_service.h"

#include <algorithm>
#include <memory>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "server/chunk_encoder.h"
#include "server/stream_state.h"

namespace stoker {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

namespace {

class BatchStreamReactor;

// Marks a stream's session as refused (the client blames no batch); a
// RESOURCE_EXHAUSTED refusal also tells the client when to ask again.
void AddRefusalTrailers(grpc::CallbackServerContext* context, const absl::Status& refusal) {
  context->AddTrailingMetadata(kSessionRefusedTrailer, "1");
  if (refusal.code() == absl::StatusCode::kResourceExhausted) {  // full: try again later
    context->AddTrailingMetadata(kRetryAfterTrailer, std::to_string(absl::ToInt64Milliseconds(kFullRetryAfter)));
  }
}

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

// One BatchStream call: a shim that feeds gRPC's events to a StreamState and
// carries out its actions with no lock held (gRPC may run reactions inline).
// The reactor deletes itself in OnDone, which gRPC calls only after Finish;
// the state returns finish only once no worker callback is pending.
class BatchStreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  BatchStreamReactor(grpc::CallbackServerContext* context, DataServiceCore* core, StreamRegistry* registry,
                     std::unique_ptr<ClientStreams::Ticket> client_place)
      : context_(context),
        core_(core),
        registry_(registry),
        client_place_(std::move(client_place)),
        state_(StreamLimits{core->max_outstanding_batches(), core->chunk_bytes(), core->max_stream_bytes()},
               &core->budget(), &core->metrics(), [this](StreamAction a) { Act(std::move(a)); }) {
    core_->metrics().streams->Increment();
    registry_->Add(this);
    Act(state_.Start());
  }

  // Called with the registry's lock held, so the reactor cannot be deleted meanwhile.
  void Drain() { Act(state_.Drain()); }

  void OnReadDone(bool ok) override {
    if (!ok) return Act(state_.OnReadsDone());  // client half-closed, or the call is gone
    v1::StreamRequest request;
    grpc::Status parsed = grpc::SerializationTraits<v1::StreamRequest>::Deserialize(&request_buffer_, &request);
    if (!parsed.ok()) {
      return Act(
          state_.OnRequest(absl::InvalidArgumentError("StreamRequest does not parse: " + parsed.error_message())));
    }
    Act(state_.OnRequest(std::move(request)));
  }

  void OnWriteDone(bool ok) override { Act(state_.OnWriteDone(ok)); }
  void OnCancel() override { Act(state_.OnCancel()); }

  void OnDone() override {
    registry_->Remove(this);
    core_->metrics().streams->Decrement();
    delete this;
  }

 private:
  // Finish may delete this (OnDone): nothing is touched after it.
  void Act(StreamAction action) {
    if (action.open) {  // nothing else is set
      // Answered at once, or on a scan thread once the dataset is open; the
      // state does not finish while a session is being opened, so `this` lives.
      return core_->StartSessionAsync(
          *action.open, [this](DataServiceCore::SessionOrError session) { Act(state_.OnSession(std::move(session))); });
    }
    if (action.read) StartRead(&request_buffer_);
    if (action.write) {
      const OutgoingChunk& c = *action.write;
      // Only this chunk's write is in flight, so the buffer is free to reuse.
      write_buffer_ = EncodeChunk(c.fields, c.payload ? c.payload : std::make_shared<const std::string>(), c.offset,
                                  c.length);  // no copy of the payload
      StartWrite(&write_buffer_);
    }
    if (action.finish) {
      if (action.failed_batch >= 0) {
        context_->AddTrailingMetadata(kFailedBatchTrailer, std::to_string(action.failed_batch));
        context_->AddTrailingMetadata(kFailedEpochTrailer, std::to_string(action.failed_epoch));
      }
      if (action.session_refused) AddRefusalTrailers(context_, *action.finish);
      Finish(ToGrpcStatus(*action.finish));
    }
  }

  grpc::CallbackServerContext* const context_;
  DataServiceCore* const core_;
  StreamRegistry* const registry_;
  const std::unique_ptr<ClientStreams::Ticket> client_place_;  // null without a gate; given back with the reactor
  grpc::ByteBuffer request_buffer_;                            // one read in flight at a time
  grpc::ByteBuffer write_buffer_;                              // one write in flight at a time
  StreamState state_;
};

// A BatchStream refused before it started (no valid token, or the client's
// streams are all taken): finishes at once, reads nothing.
class RefusedStreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RefusedStreamReactor(grpc::CallbackServerContext* context, const absl::Status& status) {
    // A limit reads as a refused session on a full server: the client waits and asks again.
    if (status.code() == absl::StatusCode::kResourceExhausted) AddRefusalTrailers(context, status);
    Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

}  // namespace

void StreamRegistry::DrainOne(BatchStreamReactor* r) { r->Drain(); }

DataServiceImpl::DataServiceImpl(DataServiceCore* core, CallGate* gate)
    : core_(core), gate_(gate), streams_(std::make_unique<StreamRegistry>()) {}

DataServiceImpl::~DataServiceImpl() = default;

void DataServiceImpl::Drain() { streams_->DrainAll(); }

grpc::ServerUnaryReactor* DataServiceImpl::OpenSession(grpc::CallbackServerContext* context,
                                                       const v1::OpenSessionRequest* request,
                                                       v1::OpenSessionResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (gate_) {
    if (absl::Status auth = gate_->Authenticate(*context); !auth.ok()) {
      reactor->Finish(ToGrpcStatus(auth));
      return reactor;
    }
  }
  // Wait for a scan at most half of what the client allows (and 2 s), so that
  // it hears "still being opened" and asks again rather than timing out.
  const absl::Duration left = absl::FromChrono(context->deadline()) - absl::Now();
  const absl::Duration patience = std::max(absl::ZeroDuration(), std::min(absl::Seconds(2), left / 2));
  // Answered here or on a catalog thread; `context`, `response` and `reactor`
  // stay valid until Finish.
  core_->OpenSessionAsync(
      request->config(), patience, [context, response, reactor](absl::StatusOr<v1::OpenSessionResponse> result) {
        if (result.ok()) {
          *response = *std::move(result);
        } else if (IsStillOpening(result.status())) {
          // The client asks again; "store" tells it that it waits for the copy.
          context->AddTrailingMetadata(kDatasetOpeningTrailer,
                                       IsStillCopyingFromStore(result.status()) ? kDatasetCopyingFromStore : "1");
        } else {
          LOG(INFO) << "OpenSession refused: " << result.status();
        }
        reactor->Finish(ToGrpcStatus(result.status()));
      });
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* DataServiceImpl::BatchStream(
    grpc::CallbackServerContext* context) {
  std::unique_ptr<ClientStreams::Ticket> place;
  if (gate_) {
    absl::Status auth = gate_->Authenticate(*context);
    if (!auth.ok()) return new RefusedStreamReactor(context, auth);
    absl::StatusOr<std::unique_ptr<ClientStreams::Ticket>> admitted = gate_->AdmitStream(*context);
    if (!admitted.ok()) {
      core_->metrics().full_refusals->Increment();
      return new RefusedStreamReactor(context, admitted.status());
    }
    place = *std::move(admitted);
  }
  return new BatchStreamReactor(context, core_, streams_.get(), std::move(place));
}

}  // namespace stoker
