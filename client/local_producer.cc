#include "client/local_producer.h"

#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/await.h"
#include "storage/remote_root.h"

namespace stoker {

LocalProducer::LocalProducer() : metrics_(registry_) {}

LocalProducer::~LocalProducer() {
  if (core_) core_->StopOpening();
}

absl::StatusOr<std::unique_ptr<LocalProducer>> LocalProducer::Create(const LocalOptions& options) {
  if (options.workers < 1) {
    return absl::InvalidArgumentError(absl::StrCat("local_workers = ", options.workers, "; must be >= 1"));
  }
  std::unique_ptr<LocalProducer> producer(new LocalProducer());
  CoreConfig core;
  core.data_root = options.data_root;
  if (IsRemoteRoot(options.data_root)) {
    absl::StatusOr<MirrorOptions> mirror = MirrorOptionsFromEnv();
    if (!mirror.ok()) return mirror.status();
    absl::StatusOr<std::unique_ptr<StoreMirror>> opened =
        OpenMirror(options.data_root, StorageOptionsFromEnv(), *std::move(mirror));
    if (!opened.ok()) {
      return absl::Status(opened.status().code(),
                          absl::StrCat("local data root '", options.data_root, "': ", opened.status().message()));
    }
    producer->mirror_ = *std::move(opened);
    core.data_root = producer->mirror_->local_root();
    core.catalog.fetch = producer->mirror_->Fetcher();
    core.catalog.streamed = producer->mirror_->Streamer();
    core.catalog.fetch_progress = [m = producer->mirror_.get()](const std::string& name) { return m->Progress(name); };
  } else if (std::error_code ec; !std::filesystem::is_directory(options.data_root, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("local data root '", options.data_root, "' is not a directory (nor an s3:// or http(s):// URL)"));
  }
  core.workers = options.workers;
  core.max_pixels = options.max_pixels;
  core.sample_delay = options.sample_delay;
  core.catalog.max_file_bytes = options.max_file_bytes;
  core.python = options.python;
  core.op_plugins = options.op_plugins;
  if (!core.python.modules.empty() && core.python.processes < 1) core.python.processes = options.workers;
  absl::StatusOr<std::unique_ptr<DataServiceCore>> made = DataServiceCore::Create(core, &producer->metrics_);
  if (!made.ok()) return made.status();
  producer->core_ = *std::move(made);
  return producer;
}

double LocalProducer::storage_wait_seconds() const { return mirror_ ? mirror_->stats().ensure_seconds : 0; }

absl::StatusOr<v1::OpenSessionResponse> LocalProducer::Open(const v1::SessionConfig& config, absl::Duration timeout) {
  using Result = absl::StatusOr<v1::OpenSessionResponse>;
  return Await<Result>(
      [&](std::function<void(Result)> done) { core_->OpenSessionAsync(config, timeout, std::move(done)); });
}

absl::StatusOr<std::unique_ptr<StreamSession>> LocalProducer::StartSession(const v1::SessionConfig& config) {
  DataServiceCore::SessionOrError session = core_->StartSession(config);
  if (!session.ok()) return session.status();
  return std::unique_ptr<StreamSession>(*std::move(session));
}

}  // namespace stoker
