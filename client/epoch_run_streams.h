// EpochRun's streams (epoch_run.cc): the interface EpochRun drives, and the
// local producer's in-process stream (the gRPC one is in epoch_run.cc, next
// to the calls it makes). Included by epoch_run.cc only.
#ifndef STOKER_CLIENT_EPOCH_RUN_STREAMS_H_
#define STOKER_CLIENT_EPOCH_RUN_STREAMS_H_

#include <deque>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/chunk_assembler.h"
#include "client/epoch_run.h"

namespace stoker {

// What EpochRun needs of a stream: a gRPC BatchStream call to a server, or the
// local producer's in-process session. Write, HalfClose and Cancel may be
// called from any thread without mu_; the stream reports through EpochRun's
// CheckHeader / OnBatch / OnDraining / OnStreamDone, OnStreamDone exactly
// once and last, after which WaitDone returns.
class EpochRun::Stream {
 public:
  virtual ~Stream() = default;
  virtual void Start() = 0;
  virtual void Write(const v1::BatchRequest& request) = 0;
  virtual void HalfClose() = 0;
  virtual void Cancel() = 0;
  virtual void WaitDone() = 0;
};

// The local producer's "stream": one in-process session whose batches are
// made on the producer's workers. Requests are submitted as they come (those
// that arrive before Start are queued); finished batches are checked as a
// server's header is, copied once into a host buffer and handed to the
// scheduler. The stream ends (OnStreamDone) once it was half-closed,
// cancelled or failed and no batch is in the making, so no worker callback
// runs after it.
class EpochRun::LocalStream final : public EpochRun::Stream {
 public:
  LocalStream(EpochRun* run, StreamId id) : run_(run), id_(id) {}

  void Start() override {
    absl::StatusOr<std::unique_ptr<StreamSession>> session = run_->local_->StartSession(run_->session_);
    std::deque<v1::BatchRequest> queued;
    std::optional<Report> report;
    {
      absl::MutexLock lock(&mu_);
      if (!session.ok()) {
        // As a server's refused session (stream_state.cc): no batch is blamed.
        // A cancellation that came first stays the reason.
        if (!ending_) refused_ = true;
        End(session.status(), /*from_server=*/true, -1, -1);
      } else {
        session_ = *std::move(session);
      }
      started_ = true;
      queued.swap(queued_);
      report = TakeReportLocked();
    }
    Deliver(report);
    if (report) return;
    for (const v1::BatchRequest& r : queued) Write(r);
  }

  void Write(const v1::BatchRequest& request) override {
    {
      absl::MutexLock lock(&mu_);
      if (ending_ || half_closed_) return;  // its batches are requested elsewhere
      if (!started_) {
        queued_.push_back(request);
        return;
      }
      ++making_;
    }
    // Submit runs no callback before it returns (BatchSession::Submit).
    absl::Status status = session_->Submit(request, [this](FinishedBatch b) { OnFinished(std::move(b)); });
    std::optional<Report> report;
    {
      absl::MutexLock lock(&mu_);
      if (!status.ok()) {
        --making_;
        End(status, /*from_server=*/true, request.batch_index(), request.epoch());
      }
      report = TakeReportLocked();
    }
    Deliver(report);
  }

  void HalfClose() override {
    std::optional<Report> report;
    {
      absl::MutexLock lock(&mu_);
      half_closed_ = true;
      report = TakeReportLocked();
    }
    Deliver(report);
  }

  void Cancel() override {
    std::optional<Report> report;
    {
      absl::MutexLock lock(&mu_);
      End(absl::CancelledError("cancelled by the client"), /*from_server=*/false, -1, -1);
      report = TakeReportLocked();
    }
    Deliver(report);
  }

  void WaitDone() override { done_.WaitForNotification(); }

 private:
  struct Report {
    absl::Status status;
    bool from_server = false;
    int64_t failed_batch = -1;
    int64_t failed_epoch = -1;
    bool refused = false;
    // The finished stream's session, released before the end is reported
    // (its caches and its share of the workers go with it).
    std::shared_ptr<StreamSession> session;
  };

  void OnFinished(FinishedBatch finished) {
    bool deliver;
    {
      absl::MutexLock lock(&mu_);
      deliver = !ending_;
    }
    absl::Status status = finished.status;
    const int64_t batch_index = finished.header.batch_index(), epoch = finished.header.epoch();
    if (deliver && status.ok()) {
      status = run_->CheckHeader(id_, finished.header);
      const size_t size = finished.data ? finished.data->size() : 0;
      const size_t image = static_cast<size_t>(finished.header.total_bytes());
      if (status.ok() && size != image + static_cast<size_t>(finished.header.field_bytes())) {
        status = absl::InternalError(absl::StrCat("local batch ", batch_index, " has ", size,
                                                  " bytes; its header says ", finished.header.total_bytes(), " + ",
                                                  finished.header.field_bytes(), " field bytes"));
      }
      if (status.ok()) {
        Batch batch;
        FillBatchFromHeader(finished.header, kLocalProducer, &batch);
        try {
          batch.data = run_->options_.buffers ? run_->options_.buffers->Get(image) : HostBuffer(image);
          if (image > 0 && batch.data.data() == nullptr) throw std::bad_alloc();
          if (size > image) batch.field_data.assign(finished.data->data() + image, size - image);
        } catch (const std::bad_alloc&) {  // this process's limit: the run ends, as for a server's batch
          status = LocalOutOfMemory(absl::StrCat("this process cannot allocate local batch ", batch_index, " (", image,
                                                 " bytes and ", size - image, " of fields)"));
        }
        if (status.ok()) {
          if (image > 0) std::memcpy(batch.data.data(), finished.data->data(), image);  // the one copy
          status = run_->OnBatch(id_, std::move(batch));
        }
      }
    }
    std::optional<Report> report;
    {
      absl::MutexLock lock(&mu_);
      --making_;
      if (deliver && !status.ok()) {
        // A batch that failed (FAIL policy) names itself, as a server's
        // trailer does; a batch our checks refused blames the stream.
        const bool failed_here = !finished.status.ok();
        End(status, /*from_server=*/failed_here, failed_here ? batch_index : -1, failed_here ? epoch : -1);
      }
      report = TakeReportLocked();
    }
    Deliver(report);
  }

  // Decides the stream's end (the first reason wins); it is reported once
  // nothing is in the making.
  void End(const absl::Status& status, bool from_server, int64_t failed_batch, int64_t failed_epoch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (ending_) return;
    ending_ = true;
    end_ = Report{status, from_server, failed_batch, failed_epoch, false};
    if (session_) session_->Cancel();  // queued samples skip their work
  }

  // The stream's end, once (and only once) it can be reported.
  std::optional<Report> TakeReportLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (reported_ || !started_ || making_ > 0 || !(ending_ || half_closed_)) return std::nullopt;
    reported_ = true;
    Report r = ending_ ? end_ : Report{};
    r.refused = ending_ && refused_;
    r.session = std::move(session_);  // no callback is pending and none will start
    return r;
  }

  // Reports the end without the lock (EpochRun calls back into streams);
  // `this` may be destroyed as soon as done_ is notified.
  void Deliver(std::optional<Report>& r) {
    if (!r) return;
    r->session.reset();
    run_->OnStreamDone(id_, r->status, r->from_server, r->failed_batch, r->failed_epoch, r->refused);
    done_.Notify();
  }

  EpochRun* const run_;
  const StreamId id_;
  absl::Notification done_;
  absl::Mutex mu_;
  // Set in Start (before started_), released when the end is reported. Write
  // reads it unlocked, but only while its own submission holds making_ > 0,
  // which keeps the end from being reported.
  std::shared_ptr<StreamSession> session_;
  std::deque<v1::BatchRequest> queued_ ABSL_GUARDED_BY(mu_);  // written before Start
  int making_ ABSL_GUARDED_BY(mu_) = 0;                       // submitted, callback not yet returned
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool half_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;
  bool reported_ ABSL_GUARDED_BY(mu_) = false;
  bool refused_ ABSL_GUARDED_BY(mu_) = false;
  Report end_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stoker

#endif  // STOKER_CLIENT_EPOCH_RUN_STREAMS_H_
