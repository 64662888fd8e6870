// stoker-server: serves decoded, augmented batches of the datasets under
// --data-root over gRPC (stoker.v1.DataService) and Prometheus metrics over
// HTTP. SIGTERM or SIGINT: stop accepting, let open streams finish for
// --shutdown-grace-seconds, then cancel them and exit 0.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "common/flag_names.h"
#include "common/log_level.h"
#include "common/malloc_tuning.h"
#include "common/metrics_endpoint.h"
#include "dataplane/base/server_metrics.h"
#include "dataplane/decode/decoder_threads.h"
#include "glog/logging.h"
#include "server/stoker_server.h"
#include "server/storage_metrics.h"
#include "storage/storage.h"
#include "storage/storage_flags.h"

ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on for gRPC (and metrics, unless --metrics-host)");
ABSL_FLAG(int, port, 50051, "gRPC port; 0 picks a free port (the bound port is printed)");
ABSL_FLAG(std::string, data_root, ".",
          "Where the datasets are: a directory, s3://bucket/prefix, http(s)://host/path or catalog:FILE (names "
          "and URLs; copied to --cache-dir as sessions open them); sessions name a dataset relative to it");
ABSL_FLAG(int, workers, 0, "Worker threads that read, decode and augment; 0 means one per CPU core");
ABSL_FLAG(int, metrics_port, 9464, "Prometheus /metrics HTTP port; 0 picks a free port, -1 disables");
ABSL_FLAG(std::string, metrics_host, "",
          "Address the metrics endpoint listens on (e.g. 127.0.0.1 to keep it on the node); empty: --host");
ABSL_FLAG(std::string, metrics_basic_auth_file, "",
          "File of accepted user:password pairs, one per line (>= 16 characters each); scrapes then need HTTP "
          "basic auth with one of them; re-read when it changes; empty: no auth");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain the server presents (with --tls-key): clients must then use TLS; re-read when "
          "the file changes (--tls-reload-seconds); empty: plain text");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert (unencrypted)");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM bundle of CAs whose client certificates are accepted: mutual TLS, every client must present one "
          "(needs --tls-cert); empty: clients are not asked for a certificate");
ABSL_FLAG(int, tls_reload_seconds, 60, "Seconds between checks of the TLS files for a new certificate, key or CA");
ABSL_FLAG(std::string, auth_token_file, "",
          "File of accepted bearer tokens, one per line (>= 16 characters; '#' comments); every DataService call "
          "must carry one (health checks need none); re-read when it changes, so tokens rotate without a restart");
ABSL_FLAG(int, max_streams_per_client, 0,
          "Streams one client may hold open at once (a client is its certificate subject under mutual TLS, else "
          "its IP address); past it a stream gets RESOURCE_EXHAUSTED with a retry hint; 0: no limit");
ABSL_FLAG(int64_t, max_stream_outstanding_bytes, int64_t{1} << 30,
          "Bytes of batches one stream may have requested and not yet received; past it the request is refused "
          "with RESOURCE_EXHAUSTED; 0: no bound but --max-inflight-bytes");
ABSL_FLAG(int64_t, max_pixels, 100'000'000,
          "Largest image decoded, in pixels (width x height), checked from the header; larger ones fail as too_large");
ABSL_FLAG(double, max_media_seconds, 3600,
          "Longest audio or video stream read, in seconds, as its header announces it or as found; longer ones fail "
          "as too_large");
ABSL_FLAG(double, max_sample_seconds, 60,
          "CPU time one sample may take on its worker, in seconds (decoding, ops and fields; a Python transform's "
          "own time is --python-transform-timeout-ms); past it the sample stops at the next check between ops or "
          "strips of a kernel, and its batch fails as DEADLINE_EXCEEDED for the client to ask another server "
          "(never replaced: a timer depends on load); 0: no limit");
ABSL_FLAG(int, max_pipeline_ops, stoker::kMaxPipelineOps,
          "Most ops a session's pipeline may have (1..1024); longer pipelines are refused at OpenSession with "
          "INVALID_ARGUMENT naming this flag");
ABSL_FLAG(int64_t, max_video_frames, 1'000'000,
          "Most frames a video stream may have (counted when it is indexed); more fail as too_large");
ABSL_FLAG(int, video_decoder_threads, 0,
          "Threads decoding one video clip; 0: automatic (--workers divided among the clips being decoded when one "
          "starts: one each while every worker decodes a clip, all of them for a lone clip)");
ABSL_FLAG(int64_t, max_file_bytes, int64_t{256} << 20,
          "Largest sample file (or tar member) read, in bytes; larger ones fail as too_large; 0: no limit");
ABSL_FLAG(int64_t, max_field_bytes, int64_t{16} << 20,
          "Largest per-sample text, bytes or json field value a session may allow itself (its max_field_bytes, "
          "default 1 MiB), in bytes; larger values fail the sample as too_large");
ABSL_FLAG(int64_t, max_annotation_bytes, int64_t{1} << 30,
          "Largest annotation file (a COCO instances JSON a session names) read, in bytes; larger ones are refused "
          "when the dataset is opened; parsing takes several times this much memory; 0: no limit");
ABSL_FLAG(int, max_datasets, 64,
          "Datasets kept open for later sessions; past this the least recently used idle one is closed");
ABSL_FLAG(bool, allow_synthetic, true,
          "Serve 'synthetic:WxH[:N[:C]]' datasets (generated JPEGs, for benchmarks); false refuses them");
ABSL_FLAG(int64_t, max_inflight_bytes, 0,
          "Bytes of batches in flight (accepted, not yet sent) over all streams; past it requests get "
          "RESOURCE_EXHAUSTED; 0: half the room the tightest limit leaves (the machine's memory, the cgroup's limit, "
          "RLIMIT_AS or RLIMIT_DATA less what is already mapped); an allocation that fails anyway fails its batch "
          "with RESOURCE_EXHAUSTED");
ABSL_FLAG(bool, allow_cache_modes, true,
          "Let sessions ask for the diagnostic cache modes (batch, decoded, raw; used by stoker-diagnose); "
          "false refuses them with FAILED_PRECONDITION");
ABSL_FLAG(int64_t, max_cache_bytes_per_session, int64_t{1} << 30,
          "Bytes one session's decoded/raw diagnostic cache may hold (also counted in --max-inflight-bytes); "
          "once full, samples reuse the filled slots");
ABSL_FLAG(int, max_sessions, 0,
          "Training jobs (SessionConfig.job) served at once; a stream of another job past this gets "
          "RESOURCE_EXHAUSTED with a retry hint and the client uses other servers; 0: no limit");
ABSL_FLAG(int, max_streams, 0,
          "Batch streams served at once (each client opens --streams-per-server per server); past this a new "
          "stream gets RESOURCE_EXHAUSTED with a retry hint; 0: no limit");
ABSL_FLAG(double, max_job_weight, 100,
          "Largest weight a job may ask for (workers are shared between jobs in proportion to their weights)");
ABSL_FLAG(int, max_job_labels, 16,
          "Job names that get their own label on per-job metrics; later jobs are counted as \"other\"");
ABSL_FLAG(int64_t, batch_cache_bytes, 0,
          "Bytes of finished batches kept for other jobs with the same data configuration (a sweep of identical "
          "jobs then costs one decode per batch while they stay within this window of each other); 0: off");
ABSL_FLAG(int, test_sample_delay_ms, 0, "Test only: extra milliseconds of worker time per sample (a slow server)");
ABSL_FLAG(int64_t, test_read_bytes_per_second, 0,
          "Test only: throttle each worker's reads to this many bytes per second (slow storage); 0: off");
ABSL_FLAG(int, chunk_kib, 4096,
          "Target size of one streamed chunk in KiB (rounded to whole samples); bigger chunks cost fewer "
          "thread hand-offs per byte (docs/transport.md)");
ABSL_FLAG(std::vector<std::string>, python_transforms, {},
          "Comma-separated Python modules whose public functions sessions may run as python(module:function) ops, "
          "imported at start by --python-executable (operator-installed code only: a session can only name "
          "functions of these modules); empty: no Python stage");
ABSL_FLAG(int, python_workers, 0,
          "Python transform worker processes (each runs one sample at a time); 0: one per worker thread (--workers)");
ABSL_FLAG(std::string, python_executable, "python3",
          "Python interpreter that runs --python-transforms (a path, or a name found on PATH), e.g. a venv's python");
ABSL_FLAG(int, python_transform_timeout_ms, 10000,
          "Milliseconds one python(...) call may take; past it the sample fails and its worker process is replaced");
ABSL_FLAG(int64_t, python_transform_max_bytes, int64_t{256} << 20,
          "Bytes of shared memory per Python worker process, for the image in and the image out; larger images fail "
          "the sample");
ABSL_FLAG(std::string, op_plugins, "",
          "Directory of C++ op plugins (*.so built against include/stoker/op_plugin.h) loaded at start; their ops "
          "join the pipeline grammar as team.op(...); a plugin of another ABI version is refused; empty: none");
ABSL_FLAG(double, shutdown_grace_seconds, 10, "Seconds open streams may run on after SIGTERM/SIGINT");

namespace {

// The server's configuration from its flags; INVALID_ARGUMENT naming the
// flag and its range when one is out of range.
absl::StatusOr<stoker::ServerConfig> ConfigFromFlags() {
  stoker::ServerConfig config;
  config.host = absl::GetFlag(FLAGS_host);
  config.port = absl::GetFlag(FLAGS_port);
  config.core.data_root = absl::GetFlag(FLAGS_data_root);
  const int workers = absl::GetFlag(FLAGS_workers);
  config.core.workers = workers > 0 ? workers : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  config.core.max_pixels = absl::GetFlag(FLAGS_max_pixels);
  config.core.max_media_seconds = absl::GetFlag(FLAGS_max_media_seconds);
  config.core.max_video_frames = absl::GetFlag(FLAGS_max_video_frames);
  config.core.video_decoder_threads = absl::GetFlag(FLAGS_video_decoder_threads);
  if (config.core.video_decoder_threads < 0 || config.core.video_decoder_threads > stoker::kMaxDecoderThreads) {
    return absl::InvalidArgumentError(absl::StrCat("--video-decoder-threads must be 0 (automatic) or 1..",
                                                   stoker::kMaxDecoderThreads, " (got ",
                                                   config.core.video_decoder_threads, ")"));
  }
  if (config.core.max_video_frames < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-video-frames must be >= 1 (got ", config.core.max_video_frames, ")"));
  }
  const double max_sample_seconds = absl::GetFlag(FLAGS_max_sample_seconds);
  config.core.max_sample_cpu = absl::Seconds(max_sample_seconds);
  config.core.max_pipeline_ops = absl::GetFlag(FLAGS_max_pipeline_ops);
  if (!(max_sample_seconds >= 0) || config.core.max_pipeline_ops < 1 ||
      config.core.max_pipeline_ops > stoker::kMaxPipelineOps) {
    return absl::InvalidArgumentError(absl::StrCat("--max-sample-seconds must be >= 0 (got ", max_sample_seconds,
                                                   ") and --max-pipeline-ops in 1..", stoker::kMaxPipelineOps, " (got ",
                                                   config.core.max_pipeline_ops, ")"));
  }
  if (config.core.max_media_seconds <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-media-seconds must be positive (got ", config.core.max_media_seconds, ")"));
  }
  config.core.max_inflight_bytes = absl::GetFlag(FLAGS_max_inflight_bytes);
  config.core.allow_cache_modes = absl::GetFlag(FLAGS_allow_cache_modes);
  config.core.max_cache_bytes_per_session = absl::GetFlag(FLAGS_max_cache_bytes_per_session);
  config.core.admission.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  config.core.admission.max_streams = absl::GetFlag(FLAGS_max_streams);
  config.core.max_job_weight = absl::GetFlag(FLAGS_max_job_weight);
  config.core.batch_cache_bytes = absl::GetFlag(FLAGS_batch_cache_bytes);
  config.core.max_field_bytes = absl::GetFlag(FLAGS_max_field_bytes);
  if (config.core.max_field_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-field-bytes must be >= 1 (got ", config.core.max_field_bytes, ")"));
  }
  if (config.core.admission.max_sessions < 0 || config.core.admission.max_streams < 0 ||
      !(config.core.max_job_weight > 0) || config.core.batch_cache_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-sessions, --max-streams and --batch-cache-bytes must be >= 0, --max-job-weight > 0"));
  }
  config.core.catalog.max_file_bytes = absl::GetFlag(FLAGS_max_file_bytes);
  config.core.catalog.max_datasets = absl::GetFlag(FLAGS_max_datasets);
  config.core.catalog.max_annotation_bytes = absl::GetFlag(FLAGS_max_annotation_bytes);
  config.core.catalog.allow_synthetic = absl::GetFlag(FLAGS_allow_synthetic);
  config.core.sample_delay = absl::Milliseconds(absl::GetFlag(FLAGS_test_sample_delay_ms));
  config.core.test_read_bytes_per_second = absl::GetFlag(FLAGS_test_read_bytes_per_second);
  config.core.chunk_bytes = int64_t{std::max(1, absl::GetFlag(FLAGS_chunk_kib))} * 1024;
  config.core.max_stream_bytes = absl::GetFlag(FLAGS_max_stream_outstanding_bytes);
  if (config.core.max_stream_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--max-stream-outstanding-bytes must be >= 0"));
  }
  config.core.python.modules = absl::GetFlag(FLAGS_python_transforms);
  config.core.python.modules.erase(
      std::remove(config.core.python.modules.begin(), config.core.python.modules.end(), ""),
      config.core.python.modules.end());
  const int python_workers = absl::GetFlag(FLAGS_python_workers);
  config.core.python.processes = python_workers > 0 ? python_workers : config.core.workers;
  config.core.python.executable = absl::GetFlag(FLAGS_python_executable);
  config.core.python.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_python_transform_timeout_ms));
  config.core.python.shared_bytes = absl::GetFlag(FLAGS_python_transform_max_bytes);
  if (python_workers < 0 || absl::GetFlag(FLAGS_python_transform_timeout_ms) < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--python-workers must be >= 0 and --python-transform-timeout-ms >= 1"));
  }
  config.core.op_plugins = absl::GetFlag(FLAGS_op_plugins);
  config.security.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  config.security.tls_key = absl::GetFlag(FLAGS_tls_key);
  config.security.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  config.security.tls_reload = absl::Seconds(std::max(1, absl::GetFlag(FLAGS_tls_reload_seconds)));
  config.security.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  config.security.max_streams_per_client = absl::GetFlag(FLAGS_max_streams_per_client);
  return config;
}

// A remote --data-root opens its store mirror and points the catalog at its
// cache; a local one must be a directory. INVALID_ARGUMENT names the flag.
absl::Status OpenDataRoot(stoker::ServerConfig* config, std::unique_ptr<stoker::StoreMirror>* mirror) {
  if (stoker::IsRemoteRoot(absl::GetFlag(FLAGS_data_root))) {
    auto m = stoker::MirrorFromFlags(absl::GetFlag(FLAGS_data_root));
    if (!m.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--data-root ", absl::GetFlag(FLAGS_data_root), ": ", m.status().ToString()));
    }
    *mirror = *std::move(m);
    config->core.data_root = (*mirror)->local_root();
    config->core.catalog.fetch = (*mirror)->Fetcher();
    config->core.catalog.streamed = (*mirror)->Streamer();
    config->core.catalog.fetch_progress = [m = mirror->get()](const std::string& name) { return m->Progress(name); };
    LOG(INFO) << "datasets from " << (*mirror)->store().root() << " are copied to " << (*mirror)->local_root().string()
              << " as sessions open them (whole objects; tar shards are the fast path: a tree of one object per "
                 "sample is one request per sample, convert it with stoker-materialize)";
  } else if (!std::filesystem::is_directory(config->core.data_root)) {
    std::ostringstream root;
    root << config->core.data_root;  // quoted, as the log always showed it
    return absl::InvalidArgumentError(absl::StrCat("--data-root ", root.str(), " is not a directory"));
  }
  return absl::OkStatus();
}

// The /metrics endpoint (with basic auth when a file is given, and the
// mirror's storage metrics); INVALID_ARGUMENT for an unreadable auth file.
absl::StatusOr<std::unique_ptr<stoker::MetricsEndpoint>> StartMetrics(const std::string& host,
                                                                      std::shared_ptr<prometheus::Registry> registry,
                                                                      stoker::StoreMirror* mirror) {
  std::shared_ptr<stoker::SecretSet> basic_auth;
  if (!absl::GetFlag(FLAGS_metrics_basic_auth_file).empty()) {
    auto pairs = stoker::SecretSet::Load(absl::GetFlag(FLAGS_metrics_basic_auth_file));
    if (!pairs.ok())
      return absl::InvalidArgumentError(absl::StrCat("--metrics-basic-auth-file: ", pairs.status().message()));
    basic_auth = *std::move(pairs);
  }
  auto endpoint = stoker::MetricsEndpoint::Start(host, absl::GetFlag(FLAGS_metrics_port), std::move(registry),
                                                 std::move(basic_auth));
  if (!endpoint.ok()) return absl::UnavailableError(endpoint.status().ToString());
  if (mirror != nullptr) (*endpoint)->Add(stoker::StorageMetrics::ForMirror(mirror));
  return endpoint;
}

}  // namespace

int main(int argc, char** argv) {
  stoker::ParseFlags(argc, argv,
                     "Stoker data server: streams preprocessed training batches over gRPC.\n"
                     "Usage: stoker-server --data-root DIR [--port 50051] [--workers N] [--metrics-port 9464]");
  stoker::TuneMallocForLargeBuffers();  // see malloc_tuning.h
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  stoker::ApplyLogLevelFromEnv();  // STOKER_LOG_LEVEL: debug, info, warning, error

  // Block the stop signals in every thread; one thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto registry = std::make_shared<prometheus::Registry>();
  stoker::ServerMetrics metrics(*registry, absl::GetFlag(FLAGS_max_job_labels));
  absl::StatusOr<stoker::ServerConfig> configured = ConfigFromFlags();
  if (!configured.ok()) {
    LOG(ERROR) << configured.status().message();
    return 2;
  }
  stoker::ServerConfig config = *std::move(configured);
  if (config.core.max_pixels > 0) {
    // OpenCV's own guard, read at its first decode: a second line behind the
    // header checks (image_header.cc), should a header reader and OpenCV ever
    // disagree about a size again.
    setenv("OPENCV_IO_MAX_IMAGE_PIXELS", std::to_string(config.core.max_pixels).c_str(), /*overwrite=*/1);
  }
  // A remote data root: each dataset is copied whole into the cache as
  // sessions first open it, and read from there (storage/store_mirror.h).
  std::unique_ptr<stoker::StoreMirror> mirror;
  if (absl::Status s = OpenDataRoot(&config, &mirror); !s.ok()) {
    LOG(ERROR) << s.message();
    return 2;
  }
  const std::string metrics_host =
      absl::GetFlag(FLAGS_metrics_host).empty() ? config.host : absl::GetFlag(FLAGS_metrics_host);
  std::unique_ptr<stoker::MetricsEndpoint> metrics_endpoint;
  if (absl::GetFlag(FLAGS_metrics_port) >= 0) {
    auto endpoint = StartMetrics(metrics_host, registry, mirror.get());
    if (!endpoint.ok()) {
      LOG(ERROR) << endpoint.status().message();
      return absl::IsInvalidArgument(endpoint.status()) ? 2 : 1;
    }
    metrics_endpoint = *std::move(endpoint);
  }
  auto server = stoker::StokerServer::Start(config, &metrics);
  if (!server.ok()) {
    LOG(ERROR) << server.status();
    return server.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (const std::string warning = stoker::ExposureWarning(config.host, config.security); !warning.empty()) {
    LOG(WARNING) << warning;
  }
  // Machine-readable start-up lines (tests and scripts parse them).
  std::cout << "stoker-server listening on " << config.host << ":" << (*server)->port() << std::endl;
  if (metrics_endpoint)
    std::cout << "stoker-server metrics on " << metrics_host << ":" << metrics_endpoint->port() << std::endl;
  LOG(INFO) << "serving " << config.core.data_root << " with " << config.core.workers << " workers";

  int signal = 0;
  sigwait(&stop_signals, &signal);
  LOG(INFO) << "received " << strsignal(signal) << "; shutting down (grace "
            << absl::GetFlag(FLAGS_shutdown_grace_seconds) << " s)";
  (*server)->Shutdown(absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace_seconds)));
  (*server)->Wait();
  server->reset();
  // The /metrics endpoint is left to the exit rather than stopped: civetweb's
  // stop waits for its threads, up to seconds while a scraper holds a
  // keep-alive connection, and it has nothing to flush. It stays reachable
  // (no leak report), and so does the store mirror its collector reads.
  static stoker::MetricsEndpoint* const kept_endpoint = metrics_endpoint.release();
  static stoker::StoreMirror* const kept_mirror = kept_endpoint != nullptr ? mirror.release() : nullptr;
  (void)kept_mirror;
  LOG(INFO) << "stopped";
  return 0;
}
