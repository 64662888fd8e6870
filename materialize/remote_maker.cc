#include "materialize/remote_maker.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/stoker_client.h"
#include "dataplane/sample/stored_sample.h"
#include "dataplane/sources/tar_shards.h"

namespace stoker {
namespace {

class ServerMaker final : public RemoteMaker {
 public:
  explicit ServerMaker(ClientConfig base) : base_(std::move(base)) {}

  // Opens the session once: refusals come back before any work.
  absl::Status Open() {
    ClientConfig config = base_;
    config.session.set_batch_size(1);
    absl::StatusOr<std::unique_ptr<StokerClient>> client = StokerClient::Connect(config, nullptr);
    if (!client.ok()) return client.status();
    const v1::OpenSessionResponse& d = (*client)->dataset();
    size_ = d.num_samples();
    fingerprint_ = d.dataset_fingerprint();
    class_names_.assign(d.class_names().begin(), d.class_names().end());
    // Every later session expects this copy of the dataset.
    base_.session.set_expected_fingerprint(fingerprint_);
    return absl::OkStatus();
  }

  int64_t size() const override { return size_; }
  const std::string& fingerprint() const override { return fingerprint_; }
  const std::vector<std::string>& class_names() const override { return class_names_; }

  absl::Status Make(int64_t batch_size, const std::vector<int64_t>& batches,
                    const std::function<absl::Status(MadeSample)>& sink, const std::atomic<bool>* cancel) override {
    if (batches.empty()) return absl::OkStatus();
    ClientConfig config = base_;
    config.session.set_batch_size(static_cast<int32_t>(batch_size));
    absl::StatusOr<std::unique_ptr<StokerClient>> connected = StokerClient::Connect(config, nullptr);
    if (!connected.ok()) return connected.status();
    StokerClient& client = **connected;
    // The epoch's other batches count as delivered: only `batches` are made.
    v1::ClientPosition position = client.Position();
    position.set_epoch(0);
    position.set_next_batch(0);
    const std::set<int64_t> wanted(batches.begin(), batches.end());
    for (int64_t b = 0; b < client.BatchesPerEpoch(); ++b) {
      if (wanted.count(b) == 0) position.add_delivered_beyond(b);
    }
    if (absl::Status s = client.Resume(position); !s.ok()) return s;
    while (true) {
      if (cancel != nullptr && cancel->load()) return absl::CancelledError("stopped");
      Batch batch;
      bool end = false;
      if (absl::Status s = client.Next(&batch, &end); !s.ok()) return s;
      if (end) return absl::OkStatus();
      if (absl::Status s = Hand(batch, sink); !s.ok()) return s;
    }
  }

 private:
  static absl::Status Hand(const Batch& batch, const std::function<absl::Status(MadeSample)>& sink) {
    std::map<int64_t, const v1::FailedSample*> failed;
    for (const v1::FailedSample& f : batch.failed_samples) failed[f.sample_index()] = &f;
    size_t offset = 0;
    for (size_t i = 0; i < batch.sample_indices.size(); ++i) {
      MadeSample m;
      m.index = batch.sample_indices[i];
      m.label = batch.labels[i];
      const size_t size = static_cast<size_t>(batch.sample_sizes[i]);  // each checked to fit the total
      if (offset + size > batch.data.size()) {
        return absl::DataLossError(
            absl::StrCat("server ", batch.server, " sent sample ", m.index, " past the end of its batch"));
      }
      if (auto f = failed.find(m.index); f != failed.end()) {
        m.stored = absl::DataLossError(f->second->reason());
        m.path = f->second->path();
      } else if (size == 0) {
        return absl::DataLossError(
            absl::StrCat("server ", batch.server, " sent sample ", m.index, " empty without saying why"));
      } else {
        const absl::string_view packed(reinterpret_cast<const char*>(batch.data.data()) + offset, size);
        std::string image;
        if (absl::Status s = UnpackStoredRecord(packed, 1 + kMaxMembersPerSample, &image, &m.fields); !s.ok()) {
          return absl::DataLossError(
              absl::StrCat("server ", batch.server, " sent sample ", m.index, " as ", s.message()));
        }
        m.stored = std::move(image);
      }
      offset += size;
      if (absl::Status s = sink(std::move(m)); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  ClientConfig base_;
  int64_t size_ = 0;
  std::string fingerprint_;
  std::vector<std::string> class_names_;
};

}  // namespace

ConnectRemote RemoteOnServers(RemoteOptions options) {
  return [options](const std::string& dataset, const std::vector<v1::Op>& prefix,
                   const StoredFormat& format) -> absl::StatusOr<std::unique_ptr<RemoteMaker>> {
    if (options.servers.empty()) return absl::InvalidArgumentError("--servers is empty");
    ClientConfig config;
    config.servers = options.servers;
    config.window_per_server = options.window_per_server;
    config.streams_per_server = options.streams_per_server;
    config.rpc_timeout = options.rpc_timeout;
    config.unavailable_timeout = options.unavailable_timeout;
    config.batch_timeout = options.batch_timeout;
    config.epochs = 1;
    config.ordered = true;  // shards are written as their samples arrive, in order
    v1::SessionConfig& s = config.session;
    s.set_dataset(dataset);
    for (const v1::Op& op : prefix) *s.add_pipeline() = op;
    s.set_sequential(true);
    s.set_bad_sample_policy(v1::SKIP);  // a failed sample is left out and listed
    s.mutable_store()->set_format(format.EncodingText());
    s.mutable_store()->set_compression(format.CompressionText());
    s.mutable_store()->set_fields(true);
    auto maker = std::make_unique<ServerMaker>(std::move(config));
    if (absl::Status st = maker->Open(); !st.ok()) return st;
    return std::unique_ptr<RemoteMaker>(std::move(maker));
  };
}

}  // namespace stoker
