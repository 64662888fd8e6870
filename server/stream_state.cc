#include "server/stream_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace stoker {

StreamState::StreamState(StreamLimits limits, MemoryBudget* budget, ServerMetrics* metrics, Act act)
    : limits_(limits), budget_(budget), metrics_(metrics), act_(std::move(act)) {}

StreamState::~StreamState() {
  absl::MutexLock lock(&mu_);
  DropOutgoing();
  if (held_bytes_ > 0) budget_->Release(held_bytes_);  // only if the shim ended early
}

StreamAction StreamState::Start() {
  StreamAction action;
  action.read = true;
  return action;
}

StreamAction StreamState::OnRequest(absl::StatusOr<v1::StreamRequest> request) {
  StreamSession* session = nullptr;
  int64_t bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    if (finished_ || broken_ || !error_.ok()) {  // the stream is ending: take no more work
      reads_done_ = true;
      return Decide();
    }
    absl::Status status = request.status();
    if (status.ok() && request->has_config()) {
      if (session_ || opening_) {
        status = absl::InvalidArgumentError("config sent twice on one stream");
      } else {
        opening_ = true;
        StreamAction action;
        action.open = request->config();
        return action;  // the next read starts once the session is open
      }
    } else if (status.ok() && !request->has_batch()) {
      status = absl::InvalidArgumentError("empty StreamRequest: set config or batch");
    } else if (status.ok() && !session_) {
      status = absl::InvalidArgumentError("the first message of a BatchStream must be the config");
    } else if (status.ok()) {
      session = session_.get();
      bytes = session->BatchBytes(request->batch());
      status = Accept(request->batch(), bytes);
    }
    if (!status.ok()) {
      LOG(WARNING) << "BatchStream refused a request: " << status;
      Fail(status);
      return Decide();
    }
  }
  // Submit outside the lock: its callback may run at once, on a worker. The
  // session stays alive: it is destroyed with the state, after finish, and
  // finish waits for producing_ to reach 0. Once OnBatch has returned, another
  // thread may finish the stream and the shim may delete the state: the
  // callback then touches only its own copy of `act`, and only for an action
  // it owns (a write in flight or the finish keep the call alive).
  absl::Status submitted = session->Submit(request->batch(), [this, bytes, act = act_](FinishedBatch b) {
    StreamAction action = OnBatch(std::move(b), bytes);
    if (action.write || action.finish || action.open || action.read) act(std::move(action));
  });
  absl::MutexLock lock(&mu_);
  if (!submitted.ok()) {
    --producing_;
    BatchGone(bytes);
    LOG(WARNING) << "BatchStream refused a request: " << submitted;
    Fail(submitted);
    return Decide();
  }
  StreamAction action = Decide();
  action.read = !reads_done_ && !finished_ && error_.ok() && !broken_;
  return action;
}

absl::Status StreamState::Accept(const v1::BatchRequest& request, int64_t bytes) {
  if (outstanding_ >= limits_.max_outstanding_batches) {
    return absl::ResourceExhaustedError(absl::StrCat("more than ", limits_.max_outstanding_batches,
                                                     " batches requested and not yet sent on one stream (batch ",
                                                     request.batch_index(), ")"));
  }
  if (limits_.max_outstanding_bytes > 0 && held_bytes_ + bytes > limits_.max_outstanding_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch ", request.batch_index(), " needs ", bytes, " bytes and this stream already has ", held_bytes_,
        " requested and not yet sent; one stream may have at most ", limits_.max_outstanding_bytes,
        " (--max-stream-outstanding-bytes): ask for fewer or smaller batches at once"));
  }
  if (!budget_->TryAcquire(bytes)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch ", request.batch_index(), " needs ", bytes, " bytes; the server's budget for batches in flight (",
        budget_->limit(), " bytes, --max-inflight-bytes) is used up; retry later or on another server"));
  }
  held_bytes_ += bytes;
  ++outstanding_;
  ++producing_;
  return absl::OkStatus();
}

StreamAction StreamState::OnReadsDone() {
  absl::MutexLock lock(&mu_);
  reads_done_ = true;
  return Decide();
}

StreamAction StreamState::OnSession(absl::StatusOr<std::unique_ptr<StreamSession>> session) {
  absl::MutexLock lock(&mu_);
  opening_ = false;
  if (!session.ok()) {
    LOG(INFO) << "BatchStream refused its config: " << session.status();
    Fail(session.status());
    session_refused_ = true;
    return Decide();
  }
  session_ = *std::move(session);
  cache_mode_ = session_->cache_mode();
  if (broken_) session_->Cancel();  // cancelled while it was being opened
  StreamAction action = Decide();
  action.read = !reads_done_ && !finished_ && error_.ok() && !broken_;
  return action;
}

StreamAction StreamState::OnBatch(FinishedBatch batch, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  --producing_;
  if (!batch.status.ok() && error_.ok()) {
    LOG(WARNING) << "batch " << batch.header.batch_index() << " failed: " << batch.status;
    Fail(batch.status);
    failed_batch_ = batch.header.batch_index();
    failed_epoch_ = batch.header.epoch();
  }
  if (broken_ || !batch.status.ok()) {
    metrics_->inflight_batches->Decrement();
    BatchGone(bytes);
  } else {
    Enqueue(batch, bytes);
  }
  return Decide();
}

StreamAction StreamState::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  write_in_flight_ = false;
  OutgoingChunk& sent = outgoing_.front();
  if (ok) {
    metrics_->sent_bytes->Increment(static_cast<double>(sent.length));
    if (sent.last_of_batch) {
      metrics_->Batches(cache_mode_).Increment();
      metrics_->send_seconds->Observe(absl::ToDoubleSeconds(absl::Now() - sent.ready_time));
    }
  } else {
    broken_ = true;
  }
  if (sent.last_of_batch) {
    metrics_->inflight_batches->Decrement();
    BatchGone(sent.batch_bytes);
  }
  outgoing_.pop_front();
  if (broken_) DropOutgoing();
  return Decide();
}

StreamAction StreamState::OnCancel() {
  absl::MutexLock lock(&mu_);
  if (session_) session_->Cancel();
  broken_ = true;
  reads_done_ = true;  // a read in flight completes with !ok; none is started
  if (!write_in_flight_) DropOutgoing();
  return Decide();
}

StreamAction StreamState::Drain() {
  absl::MutexLock lock(&mu_);
  if (drain_sent_ || broken_ || finished_) return {};
  drain_sent_ = true;
  OutgoingChunk& notice = outgoing_.emplace_back();
  notice.fields.set_draining(true);
  return Decide();
}

void StreamState::Fail(const absl::Status& status) {
  if (error_.ok()) error_ = status;
  reads_done_ = true;  // no further reads: the stream ends with the error
}

void StreamState::Enqueue(FinishedBatch& batch, int64_t bytes) {
  const size_t total = batch.data ? batch.data->size() : 0;
  const size_t chunk = static_cast<size_t>(std::max<int64_t>(1, limits_.chunk_bytes));
  for (size_t offset = 0; offset < total || offset == 0; offset += chunk) {
    OutgoingChunk& out = outgoing_.emplace_back();
    if (offset == 0) *out.fields.mutable_header() = batch.header;
    out.fields.set_batch_index(batch.header.batch_index());
    out.fields.set_offset(static_cast<int64_t>(offset));
    out.payload = batch.data;
    out.offset = offset;
    out.length = std::min(chunk, total - offset);
    out.last_of_batch = offset + chunk >= total;
    out.batch_bytes = out.last_of_batch ? bytes : 0;
    out.ready_time = batch.ready_time;
    if (total == 0) break;
  }
}

void StreamState::DropOutgoing() {
  for (const OutgoingChunk& o : outgoing_) {
    if (!o.last_of_batch) continue;
    metrics_->inflight_batches->Decrement();
    BatchGone(o.batch_bytes);
  }
  outgoing_.clear();
}

void StreamState::BatchGone(int64_t bytes) {
  --outstanding_;
  held_bytes_ -= bytes;
  budget_->Release(bytes);
}

StreamAction StreamState::Decide() {
  StreamAction next;
  if (finished_ || write_in_flight_) return next;
  if (!outgoing_.empty() && !broken_) {
    write_in_flight_ = true;
    next.write = &outgoing_.front();  // stable until OnWriteDone: the deque only grows at the back
    return next;
  }
  if (!reads_done_ || producing_ > 0 || opening_) return next;
  finished_ = true;
  next.finish = broken_ && error_.ok() ? absl::CancelledError("stream cancelled") : error_;
  next.failed_batch = failed_batch_;
  next.failed_epoch = failed_epoch_;
  next.session_refused = session_refused_;
  return next;
}

}  // namespace stoker
