// Streams open per client, bounded by --max-streams-per-client, so that one
// client (a certificate subject under mutual TLS, else a peer address) cannot
// take every stream a server has. gRPC-free; thread-safe.
#ifndef STOKER_SERVER_CLIENT_STREAMS_H_
#define STOKER_SERVER_CLIENT_STREAMS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace stoker {

class ClientStreams {
 public:
  // 0: no limit (streams are still counted).
  explicit ClientStreams(int max_per_client) : max_per_client_(max_per_client) {}

  // A stream held; given back when destroyed. Must not outlive the ClientStreams.
  class Ticket {
   public:
    ~Ticket() { owner_->Release(client_); }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

   private:
    friend class ClientStreams;
    Ticket(ClientStreams* owner, std::string client) : owner_(owner), client_(std::move(client)) {}
    ClientStreams* const owner_;
    const std::string client_;
  };

  // A ticket for one more stream of `client`, or RESOURCE_EXHAUSTED naming the
  // limit (not the client: the message goes back to whoever asked).
  absl::StatusOr<std::unique_ptr<Ticket>> Admit(const std::string& client);

  int streams(const std::string& client) const;

 private:
  void Release(const std::string& client);

  const int max_per_client_;
  mutable absl::Mutex mu_;
  std::map<std::string, int> open_ ABSL_GUARDED_BY(mu_);  // client -> streams; no zero entries
};

}  // namespace stoker

#endif  // STOKER_SERVER_CLIENT_STREAMS_H_
