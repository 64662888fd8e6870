// The Python Loader's options as the binding receives them (see
// stoker/loader.py for each one's meaning and default), and the client's
// configuration made from them: every value checked, the pipeline text parsed
// once. Value types and pure functions; thread-compatible.
#ifndef STOKER_PYTHON_SRC_LOADER_OPTIONS_H_
#define STOKER_PYTHON_SRC_LOADER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/training_loader.h"
#include "proto/stoker/v1/stoker.pb.h"

namespace stoker {

struct LoaderOptions {
  std::vector<std::string> servers;
  int local_workers = 0;
  std::string data_root = ".";
  std::vector<std::string> python_transforms;
  int python_workers = 0;
  std::string python_executable;
  double python_transform_timeout = 10;
  std::string op_plugins;
  std::string job;
  double weight = 1;
  std::string tls_ca, tls_cert, tls_key, tls_server_name, auth_token_file;
  std::string dataset;
  std::string pipeline;
  std::string fields;  // common/field_spec.h's text form; empty: none
  int64_t max_field_bytes = 0;
  std::string annotations;  // a COCO instances file under the data root
  double box_min_visibility = 0;
  std::string tokenizer;  // a SentencePiece model under the data root
  int max_tokens = 0;
  int batch_size = 256;
  uint64_t seed = 0;
  bool drop_last = false;
  int rank = 0;
  int world_size = 1;
  bool ordered = true;
  int window = 2;
  int streams_per_server = 2;
  int prefetch = 0;
  int64_t prefetch_bytes = int64_t{2} << 30;
  int max_servers = 32;
  int64_t epochs = 0;
  double connect_timeout_s = 10;
  double open_timeout_s = 1800;
  double batch_timeout_s = 120;
  double unavailable_timeout_s = 30;
  double resolve_interval_s = 5;
  std::string bad_sample_policy = "skip";
  std::string cache_mode = "none";
  std::string shuffle = "global";
  int shard_window = 0;
  std::string device = "auto";
  int gpu = 0;
  std::string dtype = "float32";
  std::string layout = "nchw";
  bool normalize = true;
  std::vector<float> mean = {0.485f, 0.456f, 0.406f};
  std::vector<float> std = {0.229f, 0.224f, 0.225f};
  int slots = 3;
  int max_slots = 32;
  double slot_wait_s = 60;
  int metrics_port = -1;
  std::string metrics_host = "0.0.0.0";
  int test_h2d_delay_ms = 0;
  // MixUp / CutMix in the stager (client/device/mixup.h); both alphas 0: off.
  double mixup_alpha = 0, cutmix_alpha = 0, mix_prob = 1, switch_prob = 0.5, label_smoothing = 0.1;
  int num_classes = 0;
};

// The session's part of the options (dataset, pipeline, fields, batch,
// policies, order) into `session`; INVALID_ARGUMENT names the option.
absl::Status SessionFromOptions(const LoaderOptions& o, v1::SessionConfig* session);
// The device's part (device, dtype, layout, normalisation, slots).
absl::Status DeviceFromOptions(const LoaderOptions& o, DeviceOptions* d);
// All of it: the client, the session, the device, metrics and MixUp/CutMix.
absl::StatusOr<LoaderConfig> ToConfig(const LoaderOptions& o);

}  // namespace stoker

#endif  // STOKER_PYTHON_SRC_LOADER_OPTIONS_H_
