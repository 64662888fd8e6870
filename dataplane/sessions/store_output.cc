#include "dataplane/sessions/store_output.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/rng.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/ops/op_registry.h"

namespace stoker {

absl::StatusOr<Pipeline> StorePipeline(const v1::SessionConfig& config, StoredFormat* format) {
  if (config.batch_size() < 1 || config.batch_size() > kMaxBatchSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_size = ", config.batch_size(), "; allowed range is 1..", kMaxBatchSize));
  }
  if (config.dtype() != v1::DTYPE_UNSPECIFIED || config.layout() != v1::LAYOUT_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        "store is set, so samples are sent as stored: leave dtype and layout unset (normalize as the last op stores "
        "float32 pixels)");
  }
  if (config.cache_mode() != v1::CACHE_NONE) {
    return absl::InvalidArgumentError(
        absl::StrCat("store is set: cache_mode must be CACHE_NONE, not ", v1::CacheMode_Name(config.cache_mode())));
  }
  absl::StatusOr<StoredFormat> parsed = ParseStoredFormat(
      config.store().format(), config.store().compression().empty() ? "none" : config.store().compression());
  if (!parsed.ok()) return absl::InvalidArgumentError(absl::StrCat("store: ", parsed.status().message()));
  absl::StatusOr<Pipeline> prefix = Pipeline::CreatePrefix({config.pipeline().begin(), config.pipeline().end()});
  if (!prefix.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("store is set, so the pipeline is the prefix to materialise: ", prefix.status().message()));
  }
  if (prefix->normalizes() && parsed->encoding != StoredEncoding::kRaw) {
    return absl::InvalidArgumentError(
        absl::StrCat("store.format = ", parsed->EncodingText(),
                     ", but the pipeline ends in normalize: float32 pixels are stored raw only"));
  }
  *format = *parsed;
  return prefix;
}

absl::StatusOr<std::string> MakeStoredSample(const Pipeline& prefix, const StoredFormat& format,
                                             absl::string_view encoded, int64_t max_pixels, SampleTimes* times) {
  try {
    Rng rng(0);  // the prefix draws nothing
    absl::StatusOr<cv::Mat> image = prefix.DecodeAndApply(encoded, rng, max_pixels, 0, times);
    if (!image.ok()) return image.status();
    const absl::Time t0 = absl::Now();
    absl::StatusOr<std::string> stored =
        EncodeStoredSample(prefix.normalizes() ? prefix.Normalized(*image) : *image, format);
    times->augment += absl::Now() - t0;
    return stored;
  } catch (const std::exception& e) {  // OpenCV throws; one sample's failure, never the thread's
    return DecodeError(DecodeFailure::kCorrupt, absl::StrCat("processing failed: ", e.what()));
  }
}

absl::StatusOr<std::vector<StoredField>> ReadStoredFields(const SampleSource& source, int64_t index,
                                                          const StoredFormat& format, std::atomic<int64_t>* dropped) {
  std::vector<StoredField> fields;
  for (std::string& ext : source.FieldMembers(index)) {
    if (!IsStorableField(ext, format)) {
      if (dropped != nullptr) dropped->fetch_add(1);
      continue;
    }
    absl::StatusOr<std::string> bytes = source.ReadField(index, {ext}, nullptr);
    if (!bytes.ok()) return bytes.status();
    fields.push_back({std::move(ext), *std::move(bytes)});
  }
  return fields;
}

int64_t EstimatedStoredBytes(const Pipeline& prefix) {
  int64_t pixels = int64_t{1024} * 768;
  for (const v1::Op& op : prefix.ops()) {
    const OpEntry* entry = FindOp(op);  // op_entry.h: each op's estimate
    if (entry != nullptr && entry->pixels != nullptr) pixels = entry->pixels(op, pixels);
  }
  return pixels * 3 * (prefix.normalizes() ? 4 : 1) + 128;  // + the .npy header
}

}  // namespace stoker
