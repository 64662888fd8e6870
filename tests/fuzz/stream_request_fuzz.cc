// The server's request handling (review 1.1, 1.4): any sequence of
// StreamRequest messages (or bytes that do not parse) through the stream's
// state machine and a real session on a synthetic dataset. Each run must
// finish exactly once with every batch's budget returned. The input is split
// into messages by 1-byte lengths; a message whose first byte is 0xff is a
// cancellation. Messages are fed only while the state asked for a read, as
// gRPC does.
#include <cstdint>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "dataplane/sessions/data_service_core.h"
#include "prometheus/registry.h"
#include "server/stream_state.h"

namespace {

struct Harness {
  Harness() : metrics(registry), core(Config(), &metrics) {}
  static stoker::CoreConfig Config() {
    stoker::CoreConfig c;
    c.workers = 2;
    c.max_inflight_bytes = 1 << 20;
    return c;
  }
  prometheus::Registry registry;
  stoker::ServerMetrics metrics;
  stoker::DataServiceCore core;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Harness* h = new Harness();
  absl::Notification finished;
  std::atomic<int> finishes{0};
  std::atomic<bool> reading{false};
  stoker::StreamState* state_ptr = nullptr;
  // Carries out actions as the gRPC shim does: writes complete at once.
  std::function<void(stoker::StreamAction)> act = [&](stoker::StreamAction a) {
    while (true) {
      if (a.open) {
        a = state_ptr->OnSession(h->core.StartSession(*a.open));
        continue;
      }
      if (a.read) reading = true;
      if (a.finish) {
        if (++finishes > 1) __builtin_trap();
        finished.Notify();
      }
      if (!a.write) return;
      a = state_ptr->OnWriteDone(true);
    }
  };
  {
    stoker::StreamState state(stoker::StreamLimits{8, 4096}, &h->core.budget(), &h->metrics, act);
    state_ptr = &state;
    act(state.Start());
    size_t pos = 0;
    while (pos < size && reading.exchange(false)) {
      const size_t len = std::min<size_t>(data[pos], size - pos - 1);
      const std::string bytes(reinterpret_cast<const char*>(data + pos + 1), len);
      pos += 1 + len;
      if (!bytes.empty() && static_cast<uint8_t>(bytes[0]) == 0xff) {
        act(state.OnCancel());
        break;
      }
      stoker::v1::StreamRequest request;
      if (!request.ParseFromString(bytes)) {
        act(state.OnRequest(absl::InvalidArgumentError("does not parse")));
      } else {
        // Keep sessions cheap: a small synthetic dataset.
        if (request.has_config()) request.mutable_config()->set_dataset("synthetic:16x16:64:4");
        act(state.OnRequest(std::move(request)));
      }
    }
    if (reading.exchange(false)) act(state.OnReadsDone());  // the client half-closes
    finished.WaitForNotification();
  }
  if (h->core.budget().used() != 0) __builtin_trap();
  return 0;
}
