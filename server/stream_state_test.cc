#include "server/stream_state.h"

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "prometheus/registry.h"

namespace stoker {
namespace {

constexpr int64_t kSampleBytes = 100;

// A session whose batches finish when the test says. Thread-safe.
class FakeSession final : public StreamSession {
 public:
  absl::Status Submit(const v1::BatchRequest& request, DoneCallback done) override {
    if (request.sample_indices_size() == 0) return absl::InvalidArgumentError("no indices");
    absl::MutexLock lock(&mu_);
    ++submits_;
    if (finished_seen_ && finished_seen_->load()) ++submits_after_finish_;
    pending_[request.batch_index()] = {request, std::move(done)};
    return absl::OkStatus();
  }
  void Cancel() override { cancelled_ = true; }
  int64_t BatchBytes(const v1::BatchRequest& r) const override { return r.sample_indices_size() * kSampleBytes; }
  v1::CacheMode cache_mode() const override { return v1::CACHE_NONE; }

  // Finishes batch `b` with `status` (on the calling thread, as a worker would).
  void Finish(int64_t b, absl::Status status = absl::OkStatus()) {
    std::pair<v1::BatchRequest, DoneCallback> job;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.find(b);
      ASSERT_NE(it, pending_.end()) << b;
      job = std::move(it->second);
      pending_.erase(it);
    }
    FinishedBatch batch;
    batch.status = status;
    batch.header.set_batch_index(b);
    batch.data = std::make_shared<const std::string>(BatchBytes(job.first), 'x');
    job.second(std::move(batch));
  }
  int submits() {
    absl::MutexLock lock(&mu_);
    return submits_;
  }
  std::atomic<bool> cancelled_{false};
  std::atomic<bool>* finished_seen_ = nullptr;
  int submits_after_finish_ = 0;

 private:
  absl::Mutex mu_;
  int submits_ = 0;
  std::map<int64_t, std::pair<v1::BatchRequest, DoneCallback>> pending_;
};

v1::StreamRequest Batch(int64_t b, int n = 2) {
  v1::StreamRequest r;
  r.mutable_batch()->set_batch_index(b);
  for (int i = 0; i < n; ++i) r.mutable_batch()->add_sample_indices(i);
  return r;
}

v1::StreamRequest Config() {
  v1::StreamRequest r;
  r.mutable_config()->set_dataset("ds");
  return r;
}

// A stream with its session open, recording what the worker path asks for.
struct Harness {
  explicit Harness(int64_t budget_bytes = 1 << 20, int max_outstanding = 64, int64_t max_stream_bytes = 0)
      : metrics(registry),
        budget(budget_bytes),
        state(StreamLimits{max_outstanding, /*chunk_bytes=*/64, max_stream_bytes}, &budget, &metrics,
              [this](StreamAction a) {
                absl::MutexLock lock(&mu);
                acted.push_back(std::move(a));
              }) {}

  void Open() {
    ASSERT_TRUE(state.Start().read);
    StreamAction open = state.OnRequest(Config());
    ASSERT_TRUE(open.open.has_value());
    ASSERT_FALSE(open.read);  // no read until the session exists
    auto s = std::make_unique<FakeSession>();
    session = s.get();
    ASSERT_TRUE(state.OnSession(std::move(s)).read);
  }
  std::vector<StreamAction> TakeActed() {
    absl::MutexLock lock(&mu);
    return std::exchange(acted, {});
  }

  prometheus::Registry registry;
  ServerMetrics metrics;
  MemoryBudget budget;
  absl::Mutex mu;
  std::vector<StreamAction> acted;
  StreamState state;
  FakeSession* session = nullptr;
};

// Review 1.1, the interleaving that freed the reactor under a worker: batch
// A fails (FAIL policy) while request B is being read. The stream finishes
// with A's error, and B is never submitted.
TEST(StreamStateTest, RequestReadWhileABatchFailsIsNotSubmitted) {
  Harness h;
  h.Open();
  StreamAction a = h.state.OnRequest(Batch(0));
  EXPECT_TRUE(a.read);
  h.session->Finish(0, absl::DataLossError("sample 3 (x.jpg): corrupt"));
  std::vector<StreamAction> acted = h.TakeActed();
  ASSERT_EQ(acted.size(), 1u);
  ASSERT_TRUE(acted[0].finish.has_value());
  EXPECT_EQ(acted[0].finish->code(), absl::StatusCode::kDataLoss);
  // The read that was in flight completes now.
  StreamAction b = h.state.OnRequest(Batch(1));
  EXPECT_FALSE(b.read);
  EXPECT_FALSE(b.finish.has_value());  // finish is returned once
  EXPECT_EQ(h.session->submits(), 1);
  EXPECT_EQ(h.budget.used(), 0);
}

// The same race, with real threads: requests keep arriving while batches
// fail. No request may be submitted once finish has been returned, and finish
// comes exactly once. (Run under ThreadSanitizer in `make test`.)
TEST(StreamStateTest, NoSubmitAfterFinishUnderConcurrency) {
  for (int round = 0; round < 200; ++round) {
    Harness h;
    h.Open();
    std::atomic<bool> finished{false};
    std::atomic<int> finishes{0};
    h.session->finished_seen_ = &finished;
    // Carries out an action as the shim would: completes writes at once.
    std::function<void(StreamAction)> note = [&](StreamAction a) {
      while (true) {
        if (a.finish) {
          finished = true;
          ++finishes;
        }
        if (!a.write) return;
        a = h.state.OnWriteDone(true);
      }
    };
    note(h.state.OnRequest(Batch(0)));
    std::thread reader([&] {
      for (int b = 1; b < 50 && !finished; ++b) note(h.state.OnRequest(Batch(b)));
      note(h.state.OnReadsDone());
    });
    std::thread worker([&] {
      for (int b = 0; b < 50; ++b) {
        while (h.session->submits() <= b && !finished) std::this_thread::yield();
        if (h.session->submits() <= b) break;
        h.session->Finish(b, b == round % 7 ? absl::DataLossError("bad") : absl::OkStatus());
        for (StreamAction& a : h.TakeActed()) note(std::move(a));
      }
    });
    reader.join();
    worker.join();
    for (StreamAction& a : h.TakeActed()) note(std::move(a));
    EXPECT_EQ(finishes.load(), 1) << "round " << round;
    EXPECT_EQ(h.session->submits_after_finish_, 0) << "round " << round;
  }
}

// Review 1.4: finished but unsent batches were not counted, so a client that
// never reads could make the server hold every batch it asked for.
TEST(StreamStateTest, UnsentBatchesCountAgainstTheStreamLimit) {
  Harness h(/*budget_bytes=*/1 << 20, /*max_outstanding=*/4);
  h.Open();
  for (int b = 0; b < 4; ++b) {
    ASSERT_TRUE(h.state.OnRequest(Batch(b)).read);
    h.session->Finish(b);  // finished; the first chunk's write never completes
  }
  StreamAction refused = h.state.OnRequest(Batch(4));
  EXPECT_FALSE(refused.read);
  EXPECT_EQ(h.session->submits(), 4);
  // The client goes away: the write in flight fails, the rest is dropped.
  EXPECT_FALSE(h.state.OnCancel().finish.has_value());
  StreamAction end = h.state.OnWriteDone(false);
  ASSERT_TRUE(end.finish.has_value());
  EXPECT_EQ(end.finish->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(h.budget.used(), 0);
}

// Issue 16: one stream's bytes are bounded below the server-wide budget, so a
// single client cannot take all of it.
TEST(StreamStateTest, PerStreamByteBoundRefusesPastItWhileTheServerBudgetHasRoom) {
  Harness h(/*budget_bytes=*/1 << 20, /*max_outstanding=*/64, /*max_stream_bytes=*/2 * 2 * kSampleBytes);
  h.Open();
  for (int b = 0; b < 2; ++b) ASSERT_TRUE(h.state.OnRequest(Batch(b)).read);
  StreamAction refused = h.state.OnRequest(Batch(2));
  EXPECT_FALSE(refused.read);
  EXPECT_EQ(h.session->submits(), 2);
  EXPECT_EQ(h.budget.used(), 400);  // the refused batch took nothing
  EXPECT_FALSE(h.state.OnCancel().finish.has_value());
  std::optional<absl::Status> finish;
  for (int b = 0; b < 2; ++b) {
    h.session->Finish(b);
    for (StreamAction& a : h.TakeActed()) {
      if (a.finish) finish = a.finish;
    }
  }
  ASSERT_TRUE(finish.has_value());
  EXPECT_EQ(finish->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(finish->message().find("--max-stream-outstanding-bytes"), std::string::npos) << *finish;
  EXPECT_EQ(h.budget.used(), 0);
}

TEST(StreamStateTest, ServerWideBudgetRefusesPastItsLimitAndIsReturnedAfterWrites) {
  Harness h(/*budget_bytes=*/3 * 2 * kSampleBytes);
  h.Open();
  for (int b = 0; b < 3; ++b) ASSERT_TRUE(h.state.OnRequest(Batch(b)).read);
  EXPECT_EQ(h.budget.used(), 600);
  StreamAction refused = h.state.OnRequest(Batch(3));
  EXPECT_FALSE(refused.read);
  EXPECT_EQ(h.session->submits(), 3);
  // Finish and write everything: the budget comes back, the stream ends with the refusal.
  std::optional<absl::Status> finish;
  for (int b = 0; b < 3; ++b) {
    h.session->Finish(b);
    std::vector<StreamAction> pending = h.TakeActed();
    while (!pending.empty()) {
      StreamAction a = std::move(pending.back());
      pending.pop_back();
      if (a.finish) finish = a.finish;
      if (a.write) pending.push_back(h.state.OnWriteDone(true));
    }
  }
  EXPECT_EQ(h.budget.used(), 0);
  ASSERT_TRUE(finish.has_value());
  EXPECT_EQ(finish->code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(finish->message().find("--max-inflight-bytes"), std::string::npos) << *finish;
}

TEST(StreamStateTest, BatchIsChunkedAndWrittenInOrderOneWriteAtATime) {
  Harness h;
  h.Open();
  h.state.OnRequest(Batch(7, /*n=*/2));  // 200 bytes: chunks of 64
  h.session->Finish(7);
  std::vector<StreamAction> acted = h.TakeActed();
  ASSERT_EQ(acted.size(), 1u);
  std::vector<std::pair<int64_t, size_t>> chunks;
  const OutgoingChunk* w = acted[0].write;
  while (w) {
    chunks.emplace_back(w->fields.offset(), w->length);
    EXPECT_EQ(w->fields.has_header(), w->fields.offset() == 0);
    EXPECT_EQ(h.state.Drain().write, nullptr);  // queued behind the write in flight
    w = h.state.OnWriteDone(true).write;
    if (w && w->fields.draining()) w = h.state.OnWriteDone(true).write;
  }
  const std::vector<std::pair<int64_t, size_t>> expected{{0, 64}, {64, 64}, {128, 64}, {192, 8}};
  EXPECT_EQ(chunks, expected);
  StreamAction end = h.state.OnReadsDone();
  ASSERT_TRUE(end.finish.has_value());
  EXPECT_TRUE(end.finish->ok());
}

TEST(StreamStateTest, CancelWhileTheSessionOpensFinishesAfterIt) {
  Harness h;
  ASSERT_TRUE(h.state.Start().read);
  ASSERT_TRUE(h.state.OnRequest(Config()).open.has_value());
  StreamAction cancelled = h.state.OnCancel();
  EXPECT_FALSE(cancelled.finish.has_value());  // the open is still running
  auto s = std::make_unique<FakeSession>();
  FakeSession* session = s.get();
  StreamAction end = h.state.OnSession(std::move(s));
  EXPECT_FALSE(end.read);
  ASSERT_TRUE(end.finish.has_value());
  EXPECT_EQ(end.finish->code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(session->cancelled_);
}

TEST(StreamStateTest, BadRequestsEndTheStreamWithTheirErrorAfterFinishedBatchesAreSent) {
  Harness h;
  h.Open();
  h.state.OnRequest(Batch(0));
  // A second config, then nothing more is read.
  StreamAction twice = h.state.OnRequest(Config());
  EXPECT_FALSE(twice.read);
  EXPECT_FALSE(twice.finish.has_value());  // batch 0 is still being produced
  h.session->Finish(0);
  std::vector<StreamAction> acted = h.TakeActed();
  ASSERT_EQ(acted.size(), 1u);
  ASSERT_NE(acted[0].write, nullptr);  // batch 0 still goes out
  StreamAction a = h.state.OnWriteDone(true);
  while (a.write) a = h.state.OnWriteDone(true);
  ASSERT_TRUE(a.finish.has_value());
  EXPECT_EQ(a.finish->code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.finish->message().find("config sent twice"), std::string::npos);

  Harness first;
  ASSERT_TRUE(first.state.Start().read);
  StreamAction no_config = first.state.OnRequest(Batch(0));
  ASSERT_TRUE(no_config.finish.has_value());
  EXPECT_NE(no_config.finish->message().find("first message"), std::string::npos);

  Harness unparsed;
  ASSERT_TRUE(unparsed.state.Start().read);
  StreamAction garbage = unparsed.state.OnRequest(absl::InvalidArgumentError("StreamRequest does not parse"));
  ASSERT_TRUE(garbage.finish.has_value());
  EXPECT_EQ(garbage.finish->code(), absl::StatusCode::kInvalidArgument);
}

TEST(StreamStateTest, FailedWriteDropsQueuedBatchesAndReturnsTheirBudget) {
  Harness h;
  h.Open();
  for (int b = 0; b < 3; ++b) h.state.OnRequest(Batch(b));
  for (int b = 0; b < 3; ++b) h.session->Finish(b);
  std::vector<StreamAction> acted = h.TakeActed();
  ASSERT_NE(acted[0].write, nullptr);
  EXPECT_EQ(h.budget.used(), 600);
  StreamAction a = h.state.OnWriteDone(false);
  EXPECT_EQ(a.write, nullptr);
  EXPECT_EQ(h.budget.used(), 0);
  StreamAction end = h.state.OnReadsDone();
  ASSERT_TRUE(end.finish.has_value());
  EXPECT_EQ(end.finish->code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace stoker
