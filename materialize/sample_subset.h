// An evenly spaced sample of a dataset, presented as a dataset of its own:
// sample i is the source's sample floor(i x size / n). stoker-profile
// materialises and serves strategies on such a sample. Immutable and
// thread-safe, like every SampleSource; shares ownership of the source.
#ifndef STOKER_MATERIALIZE_SAMPLE_SUBSET_H_
#define STOKER_MATERIALIZE_SAMPLE_SUBSET_H_

#include <cstdint>
#include <memory>

#include "dataplane/sample/sample_source.h"

namespace stoker {

// `n` of the source's samples (all of them when n >= its size or n <= 0,
// in which case the source itself is returned). The fingerprint names the
// source's and n.
std::shared_ptr<const SampleSource> EvenSample(std::shared_ptr<const SampleSource> source, int64_t n);

}  // namespace stoker

#endif  // STOKER_MATERIALIZE_SAMPLE_SUBSET_H_
