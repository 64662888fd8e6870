// BatchSession's samples as a materialised dataset stores them: made and
// encoded for a materialising session (ProduceStored), and read back from
// stored bytes (Unpack, ProduceFromBytes, StoredImage), with DecodeWhole
// for CACHE_DECODED.
#include "dataplane/sessions/batch_session.h"
#include "dataplane/sessions/batch_session_internal.h"

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "common/rng.h"
#include "dataplane/decode/image_decoder.h"
#include "dataplane/sample/stored_sample.h"
#include "dataplane/sessions/store_output.h"
#include "glog/logging.h"

namespace stoker {

using batch_session_internal::Nanos;
using batch_session_internal::ReadFailureReason;

absl::Status BatchSession::ProduceStored(int64_t index, std::string* out, Job& job) {
  if (sample_delay_ > absl::ZeroDuration()) absl::SleepFor(sample_delay_);
  const absl::Time t0 = absl::Now();
  // A stored copy keeps each sample's label: one that cannot be read is a bad sample.
  if (absl::Status label = source_->LabelStatus(index); !label.ok()) return Failed(index, label, "bad_field");
  absl::StatusOr<std::string> bytes = ReadSample(index);
  if (bytes.ok() && read_bytes_per_second_ > 0) {  // test-only slow storage
    absl::SleepFor(absl::Seconds(static_cast<double>(bytes->size()) / static_cast<double>(read_bytes_per_second_)));
  }
  const absl::Time t1 = absl::Now();
  job.read_ns += Nanos(t1 - t0);
  metrics_->read_seconds->Observe(absl::ToDoubleSeconds(t1 - t0));
  metrics_->samples->Increment();
  if (!bytes.ok()) {
    const absl::Status& s = bytes.status();
    return Failed(index, s, ReadFailureReason(s));
  }
  metrics_->read_bytes->Increment(static_cast<double>(bytes->size()));
  SampleTimes times;
  absl::StatusOr<std::string> stored = MakeStoredSample(pipeline_, *store_, *bytes, max_pixels_, &times);
  job.decode_ns += Nanos(times.decode);
  job.augment_ns += Nanos(times.augment);
  metrics_->decode_seconds->Observe(absl::ToDoubleSeconds(times.decode));
  if (!stored.ok()) return Failed(index, stored.status(), DecodeFailureName(DecodeFailureOf(stored.status())));
  metrics_->augment_seconds->Observe(absl::ToDoubleSeconds(times.augment));
  if (!config_.store().fields()) {
    *out = *std::move(stored);
    return absl::OkStatus();
  }
  std::atomic<int64_t> dropped{0};
  std::vector<StoredField> fields;
  const absl::Status read = Guarded(index, [&] {
    absl::StatusOr<std::vector<StoredField>> f = ReadStoredFields(*source_, index, *store_, &dropped);
    if (!f.ok()) return f.status();
    fields = *std::move(f);
    return absl::OkStatus();
  });
  if (!read.ok()) {
    return Failed(index, read, ReadFailureReason(read));
  }
  if (dropped.load() > 0 && failure_log_->FirstTime("reserved field names")) {
    LOG(WARNING) << "materialising '" << config_.dataset() << "': " << source_->Describe(index)
                 << " has members whose names the stored dataset reserves (" << store_->Field()
                 << ", cls, xxh3, *.xxh3); they are left out";
  }
  *out = PackStoredRecord(*stored, fields);
  return absl::OkStatus();
}

int64_t BatchSession::MaxStoredBytes() const {
  // A stored sample never needs much more than its raw pixels plus headers.
  return max_pixels_ > 0 ? max_pixels_ * 3 + (int64_t{1} << 20) : int64_t{1} << 31;
}

namespace {

// A stored sample's error as a decode failure (the metrics' reason label):
// over the pixel limit is too_large, anything else corrupt.
absl::Status StoredSampleError(const absl::Status& status) {
  if (!absl::IsDataLoss(status) && !absl::IsResourceExhausted(status)) return status;  // already a decode error
  return DecodeError(absl::IsResourceExhausted(status) ? DecodeFailure::kTooLarge : DecodeFailure::kCorrupt,
                     status.message());
}

}  // namespace

absl::StatusOr<std::string> BatchSession::Unpack(absl::string_view bytes) const {
  absl::StatusOr<std::string> plain = Decompress(bytes, source_->stored()->format.compression, MaxStoredBytes());
  if (!plain.ok()) return StoredSampleError(plain.status());
  return plain;
}

absl::Status BatchSession::ProduceFromBytes(std::string bytes, Rng& rng, uint8_t* dst, SampleTimes* times,
                                            UserOpIo* io) const {
  const StoredForm* stored = source_->stored();
  // A materialised sample: undo the compression (decode time), then run the
  // ops after the stored prefix.
  const absl::Time t0 = absl::Now();
  if (stored->format.compression != StoredCompression::kNone) {
    absl::StatusOr<std::string> plain = Unpack(bytes);
    if (!plain.ok()) {
      times->decode = absl::Now() - t0;
      return plain.status();
    }
    bytes = *std::move(plain);
  }
  if (stored->format.encoding == StoredEncoding::kJpeg) {
    // Lossy anyway: the first op is fused with decoding (a region, DCT scaling) for speed.
    absl::Status status = pipeline_.Produce(bytes, rng, max_pixels_, dst, times, first_op_, nullptr, io);
    times->decode = absl::Now() - t0 - times->augment - times->python;  // decompression counts as decoding
    return status;
  }
  // Raw and PNG: the whole stored image, then the ops exactly as online
  // (fusing a resize with decoding would resample differently).
  absl::StatusOr<cv::Mat> image = StoredImage(bytes);
  if (!image.ok()) {
    times->decode = absl::Now() - t0;
    return image.status();
  }
  const absl::Time t1 = absl::Now();
  const absl::Duration python_before = io->python_time;
  absl::StatusOr<cv::Mat> applied = pipeline_.Apply(*std::move(image), rng, first_op_, max_pixels_, nullptr, io);
  times->python = io->python_time - python_before;
  absl::Status status = applied.ok() ? pipeline_.Store(*applied, dst) : applied.status();
  times->decode = t1 - t0;
  times->augment = absl::Now() - t1 - times->python;
  return status;
}

absl::StatusOr<cv::Mat> BatchSession::StoredImage(const std::string& plain) const {
  if (source_->stored()->format.encoding != StoredEncoding::kRaw) return DecodeImage(plain, CropBox{}, 8, max_pixels_);
  absl::StatusOr<cv::Mat> image = ParseNpyImage(plain, max_pixels_);
  if (!image.ok()) return StoredSampleError(image.status());
  return image;
}

absl::StatusOr<cv::Mat> BatchSession::DecodeWhole(const std::string& bytes) const {
  const StoredForm* stored = source_->stored();
  if (stored == nullptr) return DecodeImage(bytes, CropBox{}, 8, max_pixels_);
  if (stored->format.compression == StoredCompression::kNone) {
    absl::StatusOr<cv::Mat> image = StoredImage(bytes);
    if (!image.ok()) return image.status();
    return image->clone();  // owns its pixels, not the caller's bytes
  }
  absl::StatusOr<std::string> plain = Unpack(bytes);
  if (!plain.ok()) return plain.status();
  absl::StatusOr<cv::Mat> image = StoredImage(*plain);
  if (!image.ok()) return image.status();
  return image->clone();  // owns its pixels: `plain` goes
}

}  // namespace stoker
