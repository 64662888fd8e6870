// Raw TCP over 127.0.0.1 moving batch-sized buffers: the baseline that
// iperf3 is not. iperf3 sends one small buffer over and over from the CPU
// cache; a data server sends batches that live in memory, and a client fills
// batch buffers far bigger than the cache. Here a sender thread writes
// batches from a ring of --ring buffers of --batch-bytes, --write-kib at a
// time, and the receiver reads them into a ring of batch buffers, with no
// framing, parsing or library in between. Prints the receiver's rate after
// the first two batches, in bytes per second, as `bytes_per_second N`.
// Usage: stoker-raw-tcp-bench [--seconds 3] [--batch-bytes 38535168]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "common/flag_names.h"

ABSL_FLAG(double, seconds, 3, "How long the sender sends, in seconds");
ABSL_FLAG(int64_t, batch_bytes, int64_t{256} * 224 * 224 * 3, "Bytes per batch (default: 256 x 224x224x3 uint8)");
ABSL_FLAG(int, ring, 6, "Batch buffers on each side, used in turn");
ABSL_FLAG(int, write_kib, 1024, "Bytes per send() call, in KiB");

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "stoker-raw-tcp-bench: %s: %s\n", what, std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  stoker::ParseFlags(argc, argv,
                     "Raw TCP over 127.0.0.1 with batch-sized buffers (the transport benchmark's memory-resident "
                     "baseline).\nUsage: stoker-raw-tcp-bench [--seconds 3] [--batch-bytes N]");
  const size_t batch = static_cast<size_t>(absl::GetFlag(FLAGS_batch_bytes));
  const int ring = std::max(1, absl::GetFlag(FLAGS_ring));
  const size_t piece = static_cast<size_t>(std::max(1, absl::GetFlag(FLAGS_write_kib))) * 1024;
  const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_seconds));

  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 || getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Fail("listen on 127.0.0.1");
  }
  std::atomic<bool> send_failed{false};
  std::thread sender([&] {
    std::vector<std::vector<char>> buffers(static_cast<size_t>(ring), std::vector<char>(batch, 'x'));
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      send_failed = true;
      if (fd >= 0) close(fd);
      return;
    }
    const absl::Time end = absl::Now() + duration;
    for (size_t k = 0; absl::Now() < end && !send_failed; ++k) {
      const char* data = buffers[k % buffers.size()].data();
      for (size_t off = 0; off < batch && !send_failed;) {
        const ssize_t n = send(fd, data + off, std::min(piece, batch - off), 0);
        if (n <= 0) send_failed = true;
        off += n > 0 ? static_cast<size_t>(n) : 0;
      }
    }
    close(fd);
  });
  const int fd = accept(listener, nullptr, nullptr);
  if (fd < 0) return Fail("accept");
  std::vector<std::vector<char>> buffers(static_cast<size_t>(ring), std::vector<char>(batch, 0));
  size_t counted = 0;
  absl::Time start;
  for (size_t k = 0;; ++k) {
    char* data = buffers[k % buffers.size()].data();
    size_t off = 0;
    while (off < batch) {
      const ssize_t n = recv(fd, data + off, batch - off, 0);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    if (off < batch) break;           // the sender is done
    if (k == 1) start = absl::Now();  // the first two batches warm up
    if (k >= 2) counted += batch;
  }
  const absl::Duration elapsed = absl::Now() - start;
  sender.join();
  close(fd);
  close(listener);
  if (send_failed) return Fail("send");
  if (counted == 0) {
    std::fprintf(stderr, "stoker-raw-tcp-bench: fewer than 3 batches in %s; raise --seconds\n",
                 absl::FormatDuration(duration).c_str());
    return 1;
  }
  std::printf("bytes_per_second %.0f\n", static_cast<double>(counted) / absl::ToDoubleSeconds(elapsed));
  return 0;
}
