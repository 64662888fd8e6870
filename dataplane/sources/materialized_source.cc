#include "dataplane/sources/materialized_source.h"

#include <map>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/pipeline_text.h"
#include "dataplane/sources/dataset.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"

namespace stoker {
namespace fs = std::filesystem;

bool HasManifest(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / kManifestFileName, ec)) return false;
  // Another tool's manifest.json (valid JSON of another kind) beside plain
  // tar shards is not ours; one that does not parse is ours, damaged, and
  // Open names the damage.
  absl::StatusOr<std::string> text = ReadFileBytes(dir / kManifestFileName, int64_t{1} << 30);
  if (!text.ok()) return true;
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return true;
  return j.is_object() && j.value("kind", "") == kManifestKind;
}

absl::StatusOr<std::shared_ptr<const MaterializedSource>> MaterializedSource::Open(const fs::path& dir,
                                                                                   int64_t max_file_bytes,
                                                                                   const std::atomic<bool>* cancelled,
                                                                                   const StreamedShards* streamed) {
  absl::StatusOr<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  const std::string where = (dir / kManifestFileName).string();
  ShardSelection selection;
  selection.image_field = manifest->format.Field();
  std::map<std::string, int64_t> in_store;  // streamed shards' sizes by file name
  if (streamed != nullptr) {
    for (const ObjectInfo& o : streamed->shards) in_store[fs::path(o.key).filename().string()] = o.size;
  }
  for (const Manifest::Shard& shard : manifest->shards) {
    std::error_code ec;
    auto remote = in_store.find(shard.name);
    const std::uintmax_t bytes =
        remote != in_store.end() ? static_cast<std::uintmax_t>(remote->second) : fs::file_size(dir / shard.name, ec);
    if (ec) {
      return absl::DataLossError(absl::StrCat(where, " lists shard ", shard.name, ", which is missing (", ec.message(),
                                              "): the manifest does not match its shards"));
    }
    if (static_cast<int64_t>(bytes) != shard.bytes) {
      return absl::DataLossError(absl::StrCat("shard ", shard.name, " holds ", bytes, " bytes; ", where, " says ",
                                              shard.bytes, ": the manifest does not match its shards"));
    }
    selection.shards.push_back(shard.name);
  }
  if (manifest->shards.empty()) return absl::DataLossError(absl::StrCat(where, " lists no shards"));
  absl::StatusOr<std::shared_ptr<const TarShardSource>> shards =
      TarShardSource::Open(dir, max_file_bytes, cancelled, &selection, MediaKind::kImage, streamed);
  if (absl::IsNotFound(shards.status())) {  // the shards hold no member of the manifest's format
    return absl::DataLossError(absl::StrCat(where, " says samples are stored as .", selection.image_field, " (format ",
                                            manifest->format.Name(),
                                            "), but its shards hold no such member: the "
                                            "manifest's format or compression does not match its shards"));
  }
  if (!shards.ok()) return shards.status();
  if (!(*shards)->damage().empty()) {
    return absl::DataLossError(
        absl::StrCat("damaged shard in ", dir.string(), ": ", absl::StrJoin((*shards)->damage(), "; ")));
  }
  std::map<std::string, int64_t> counted;  // shard file name -> samples found
  for (int64_t i = 0; i < (*shards)->size(); ++i) {
    const std::string described = (*shards)->Describe(i);
    ++counted[described.substr(0, described.find(':'))];
    if ((*shards)->label(i) >= static_cast<int64_t>(manifest->class_names.size())) {
      return absl::DataLossError(absl::StrCat(described, " has label ", (*shards)->label(i), "; ", where, " names ",
                                              manifest->class_names.size(), " classes"));
    }
  }
  for (const Manifest::Shard& shard : manifest->shards) {
    if (counted[shard.name] != shard.samples) {
      return absl::DataLossError(absl::StrCat("shard ", shard.name, " holds ", counted[shard.name], " samples with a .",
                                              selection.image_field, " member; ", where, " says ", shard.samples,
                                              ": the manifest does not match its shards"));
    }
  }
  std::shared_ptr<MaterializedSource> source(new MaterializedSource());
  // The content as indexed and as made: a copy made from other source pixels,
  // or with another prefix or format, has another fingerprint even where the
  // shards' member sizes agree.
  FingerprintBuilder fingerprint;
  fingerprint.Add((*shards)->fingerprint()).Add(manifest->source_fingerprint).Add(PipelineToText(manifest->prefix));
  fingerprint.Add(manifest->format.Name());
  for (const Manifest::Shard& shard : manifest->shards) fingerprint.Add(shard.checksum);
  source->fingerprint_ = fingerprint.Finish();
  source->stored_ = {manifest->prefix, manifest->format};
  source->manifest_ = *std::move(manifest);
  source->shards_ = *std::move(shards);
  std::string ignored;
  source->checksummed_ =
      source->shards_->size() > 0 && source->shards_->ReadField(0, {kStoredChecksumField}, &ignored).ok();
  if (!source->checksummed_) {
    LOG(WARNING) << "materialised dataset " << dir.string()
                 << " has no per-sample checksums (made before they were written): damage to its shards after "
                    "they were made is not detected; materialise it again to have them";
  }
  return std::shared_ptr<const MaterializedSource>(std::move(source));
}

absl::StatusOr<std::string> MaterializedSource::Read(int64_t index) const {
  absl::StatusOr<std::string> bytes = shards_->Read(index);
  if (!bytes.ok() || !checksummed_) return bytes;
  std::string which;
  absl::StatusOr<std::string> expected = shards_->ReadField(index, {kStoredChecksumField}, &which);
  if (!expected.ok()) {
    return DecodeError(DecodeFailure::kCorrupt, absl::StrCat(Describe(index), " has no checksum member (.",
                                                             kStoredChecksumField, ") though its dataset has them"));
  }
  const std::string actual = StoredChecksum(*bytes);
  if (absl::StripAsciiWhitespace(*expected) != actual) {
    return DecodeError(
        DecodeFailure::kCorrupt,
        absl::StrCat(Describe(index), ": stored bytes have checksum ", actual, ", the shard says ",
                     absl::CHexEscape(expected->substr(0, 32)), ": the shard was changed after it was made"));
  }
  return bytes;
}

absl::StatusOr<std::string> MaterializedSource::ReadField(int64_t index, const std::vector<std::string>& extensions,
                                                          std::string* which, int64_t max_bytes) const {
  if (!manifest_.stores_fields) return SampleSource::ReadField(index, extensions, which, max_bytes);
  std::string ext;
  absl::StatusOr<std::string> bytes = shards_->ReadField(index, extensions, &ext, max_bytes);
  if (which != nullptr) *which = ext;
  if (!bytes.ok() || !IsStorableField(ext, manifest_.format)) return bytes;  // the label, or a missing field
  absl::StatusOr<std::string> sums = shards_->ReadField(index, {kStoredFieldsChecksumField}, nullptr);
  if (!sums.ok()) {
    return DecodeError(DecodeFailure::kCorrupt, absl::StrCat(Describe(index), ".", ext, " has no checksum (no .",
                                                             kStoredFieldsChecksumField, " member)"));
  }
  const std::string actual = StoredChecksum(*bytes);
  for (absl::string_view line : absl::StrSplit(*sums, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    if (parts.first != ext) continue;
    if (absl::StripAsciiWhitespace(parts.second) == actual) return bytes;
    return DecodeError(
        DecodeFailure::kCorrupt,
        absl::StrCat(Describe(index), ".", ext, " has checksum ", actual, ", the shard says ",
                     absl::CHexEscape(parts.second.substr(0, 32)), ": the shard was changed after it was made"));
  }
  return DecodeError(DecodeFailure::kCorrupt, absl::StrCat(Describe(index), ".", ext, " has no checksum in its .",
                                                           kStoredFieldsChecksumField, " member"));
}

}  // namespace stoker
