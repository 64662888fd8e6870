#include "server/client_streams.h"

#include "absl/strings/str_cat.h"

namespace stoker {

absl::StatusOr<std::unique_ptr<ClientStreams::Ticket>> ClientStreams::Admit(const std::string& client) {
  absl::MutexLock lock(&mu_);
  int& open = open_[client];
  if (max_per_client_ > 0 && open >= max_per_client_) {
    return absl::ResourceExhaustedError(absl::StrCat("this client already has ", open,
                                                     " streams open on this server (--max-streams-per-client ",
                                                     max_per_client_, "); retry later or use another server"));
  }
  ++open;
  return std::unique_ptr<Ticket>(new Ticket(this, client));
}

void ClientStreams::Release(const std::string& client) {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(client);
  if (it != open_.end() && --it->second <= 0) open_.erase(it);
}

int ClientStreams::streams(const std::string& client) const {
  absl::MutexLock lock(&mu_);
  auto it = open_.find(client);
  return it == open_.end() ? 0 : it->second;
}

}  // namespace stoker
