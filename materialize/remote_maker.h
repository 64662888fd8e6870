// stoker-materialize --servers: a RemoteMaker (materializer.h) over the
// Stoker client. The servers run the prefix and encode each sample as stored
// (SessionConfig.store in stoker.proto); the client visits the dataset in
// index order (SessionConfig.sequential), pulls batches from every server as
// each returns work, reassigns a failed server's batches, and hands them over
// in order exactly once; a rerun fetches only the shards not yet made
// (StokerClient::Resume with the made ones counted as delivered).
#ifndef STOKER_MATERIALIZE_REMOTE_MAKER_H_
#define STOKER_MATERIALIZE_REMOTE_MAKER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "materialize/materializer.h"

namespace stoker {

struct RemoteOptions {
  std::vector<std::string> servers;  // host:port entries, or one dns:///name:port
  int window_per_server = 2;         // batches requested from one server at a time
  int streams_per_server = 2;
  absl::Duration rpc_timeout = absl::Seconds(10);
  // With no server answering for this long, the run stops (its finished
  // shards are kept for a rerun).
  absl::Duration unavailable_timeout = absl::Seconds(30);
  absl::Duration batch_timeout = absl::Seconds(120);
};

// A MaterializeConfig::remote that connects to `options.servers`.
ConnectRemote RemoteOnServers(RemoteOptions options);

}  // namespace stoker

#endif  // STOKER_MATERIALIZE_REMOTE_MAKER_H_
