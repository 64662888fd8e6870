#include "dataplane/sources/manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dataplane/ops/pipeline.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sources/dataset.h"
#include "dataplane/sources/json_fields.h"
#include "nlohmann/json.hpp"
#include "xxhash.h"

namespace stoker {
namespace {

using json_fields::Array;
using json_fields::Int;
using json_fields::String;
using json_fields::Strings;
using nlohmann::json;

absl::StatusOr<Manifest> FromJson(const json& j) {
  Manifest m;
  const int64_t version = Int(j, "format_version");
  if (version > kManifestVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("manifest format_version ", version, " is newer than this server reads (", kManifestVersion, ")"));
  }
  const json& source = json_fields::Field(j, "source");
  m.source_dataset = String(source, "dataset");
  m.source_fingerprint = String(source, "fingerprint");
  m.source_samples = Int(source, "samples");
  const std::string prefix_text = String(j, "prefix");
  absl::StatusOr<std::vector<v1::Op>> prefix =
      prefix_text.empty() ? std::vector<v1::Op>{} : ParsePipelineText(prefix_text);  // empty: decoded pixels
  if (!prefix.ok()) return absl::DataLossError(absl::StrCat("manifest \"prefix\": ", prefix.status().message()));
  if (version < 2) {  // made before resizes antialiased
    for (v1::Op& op : *prefix) {
      if (op.has_resize() && !op.resize().has_antialias()) op.mutable_resize()->set_antialias(false);
      if (op.has_resize_pad() && !op.resize_pad().has_antialias()) op.mutable_resize_pad()->set_antialias(false);
    }
  }
  absl::StatusOr<Pipeline> checked = Pipeline::CreatePrefix(*prefix);
  if (!checked.ok()) return absl::DataLossError(absl::StrCat("manifest \"prefix\": ", checked.status().message()));
  m.prefix = checked->ops();
  absl::StatusOr<StoredFormat> format = ParseStoredFormat(String(j, "format"), String(j, "compression"));
  if (!format.ok()) return absl::DataLossError(absl::StrCat("manifest: ", format.status().message()));
  m.format = *format;
  if (String(j, "field") != m.format.Field()) {
    return absl::DataLossError(absl::StrCat("manifest \"field\" is \"", String(j, "field"), "\"; format ",
                                            m.format.Name(), " stores \"", m.format.Field(), "\""));
  }
  m.samples = Int(j, "samples");
  m.class_names = Strings(j, "class_names");
  if (m.class_names.size() > 1'000'000) {
    return absl::DataLossError(absl::StrCat("manifest names ", m.class_names.size(), " classes; at most 1000000"));
  }
  m.created = j.contains("created") && j["created"].is_string() ? j["created"].get<std::string>() : "";
  int64_t total = 0;
  for (const json& s : Array(j, "shards")) {
    Manifest::Shard shard{String(s, "name"), Int(s, "samples"), Int(s, "bytes"), String(s, "checksum")};
    if (shard.name.empty() || shard.name.find('/') != std::string::npos || shard.name[0] == '.') {
      return absl::DataLossError(absl::StrCat("manifest shard name \"", shard.name, "\" is not a plain file name"));
    }
    constexpr int64_t kMaxCount = int64_t{1} << 48;  // far past any shard; keeps the sum from overflowing
    if (shard.samples < 0 || shard.bytes < 0 || shard.samples > kMaxCount || shard.bytes > kMaxCount) {
      return absl::DataLossError(absl::StrCat("manifest shard ", shard.name, " has counts out of range (",
                                              shard.samples, " samples, ", shard.bytes, " bytes)"));
    }
    total += shard.samples;
    m.shards.push_back(std::move(shard));
  }
  if (total != m.samples) {
    return absl::DataLossError(absl::StrCat("manifest says ", m.samples, " samples; its shards hold ", total));
  }
  for (const json& f : Array(j, "failed")) {
    m.failed.push_back({Int(f, "index"), String(f, "path"), String(f, "reason")});
  }
  if (j.contains("fields")) {  // absent in datasets made before fields were stored
    m.stores_fields = true;
    m.fields = Strings(j, "fields");
  }
  return m;
}

}  // namespace

std::string Manifest::ToJson() const {
  json j;
  j["format_version"] = kManifestVersion;
  j["kind"] = kManifestKind;
  j["source"] = {{"dataset", source_dataset}, {"fingerprint", source_fingerprint}, {"samples", source_samples}};
  j["prefix"] = PipelineToText(prefix);
  j["format"] = format.EncodingText();
  j["compression"] = format.CompressionText();
  j["field"] = format.Field();
  j["samples"] = samples;
  j["class_names"] = class_names;
  json shard_list = json::array();
  for (const Shard& s : shards) {
    shard_list.push_back({{"name", s.name}, {"samples", s.samples}, {"bytes", s.bytes}, {"checksum", s.checksum}});
  }
  j["shards"] = std::move(shard_list);
  json failed_list = json::array();
  for (const Failed& f : failed) failed_list.push_back({{"index", f.index}, {"path", f.path}, {"reason", f.reason}});
  j["failed"] = std::move(failed_list);
  j["created"] = created;
  if (stores_fields) j["fields"] = fields;
  // Invalid UTF-8 in a path or reason is replaced, never a throw.
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

absl::StatusOr<Manifest> ParseManifest(const std::string& text) {
  try {
    return FromJson(json::parse(text));
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat("manifest is not valid: ", e.what()));
  }
}

absl::StatusOr<Manifest> ReadManifest(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kManifestFileName;
  absl::StatusOr<std::string> text = ReadFileBytes(path, int64_t{1} << 30);
  if (!text.ok()) return text.status();
  absl::StatusOr<Manifest> m = ParseManifest(*text);
  if (!m.ok()) return absl::Status(m.status().code(), absl::StrCat(path.string(), ": ", m.status().message()));
  return m;
}

absl::StatusOr<std::string> FileChecksum(const std::filesystem::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("cannot open ", path.string()));
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(), XXH3_freeState);
  XXH3_128bits_reset(state.get());
  std::string buf(size_t{1} << 20, '\0');
  for (;;) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0) {
      close(fd);
      return absl::DataLossError(absl::StrCat("read error in ", path.string()));
    }
    if (n == 0) break;
    XXH3_128bits_update(state.get(), buf.data(), static_cast<size_t>(n));
  }
  close(fd);
  const XXH128_hash_t h = XXH3_128bits_digest(state.get());
  return absl::StrFormat("xxh128:%016x%016x", h.high64, h.low64);
}

}  // namespace stoker
