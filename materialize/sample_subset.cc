#include "materialize/sample_subset.h"

#include <string>
#include <vector>

namespace stoker {
namespace {

class EvenSampleSource : public SampleSource {
 public:
  EvenSampleSource(std::shared_ptr<const SampleSource> source, int64_t n)
      : source_(std::move(source)),
        n_(n),
        fingerprint_(FingerprintBuilder().Add(source_->fingerprint()).Add("even sample").Add(n).Finish()) {}

  int64_t size() const override { return n_; }
  const std::vector<std::string>& class_names() const override { return source_->class_names(); }
  int32_t label(int64_t index) const override { return source_->label(Map(index)); }
  std::string Describe(int64_t index) const override { return source_->Describe(Map(index)); }
  absl::StatusOr<std::string> Read(int64_t index) const override { return source_->Read(Map(index)); }
  const std::string& fingerprint() const override { return fingerprint_; }
  const StoredForm* stored() const override { return source_->stored(); }

 private:
  // Exact in 128 bits: index x size fits for any real dataset.
  int64_t Map(int64_t index) const { return static_cast<int64_t>(static_cast<__int128>(index) * source_->size() / n_); }

  const std::shared_ptr<const SampleSource> source_;
  const int64_t n_;
  const std::string fingerprint_;
};

}  // namespace

std::shared_ptr<const SampleSource> EvenSample(std::shared_ptr<const SampleSource> source, int64_t n) {
  if (n <= 0 || n >= source->size()) return source;
  return std::make_shared<EvenSampleSource>(std::move(source), n);
}

}  // namespace stoker
