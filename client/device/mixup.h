// MixUp and CutMix as timm's `Mixup` in batch mode: with probability
// mix_prob a batch is mixed with itself reversed (image i with image N-1-i),
// by MixUp (lambda x a + (1 - lambda) x b, lambda ~ Beta(mixup_alpha)) or
// CutMix (a box of sqrt(1 - lambda) of each side around a uniform centre,
// clipped, pasted from the reversed batch; lambda then corrected to the
// pasted area), chosen with switch_prob when both alphas are set. The targets
// are soft: lambda x onehot(y) + (1 - lambda) x onehot(reversed y), one-hot
// rows with label smoothing (off = smoothing / classes, on = 1 - smoothing +
// off).
//
// The draws come from (seed, epoch, batch index) alone, so a batch is mixed
// the same way whoever stages it and on resume; the C++ client (the stager's
// conversion, tensor_convert.h) and the Python loader (stoker/mixup.py) use
// these same draws. Pure functions; thread-safe.
#ifndef STOKER_CLIENT_DEVICE_MIXUP_H_
#define STOKER_CLIENT_DEVICE_MIXUP_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace stoker {

struct MixupOptions {
  double mixup_alpha = 0;    // 0: no MixUp
  double cutmix_alpha = 0;   // 0: no CutMix
  double mix_prob = 1.0;     // chance that a batch is mixed at all
  double switch_prob = 0.5;  // chance of CutMix when both alphas are set
  double label_smoothing = 0.1;
  int num_classes = 0;  // the soft targets' width; 0: the dataset's classes
  uint64_t seed = 0;    // the session's seed (TrainingLoader fills it in)

  bool enabled() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

// INVALID_ARGUMENT naming the setting and its range (negative alphas,
// probabilities outside 0..1, both alphas 0); num_classes is checked where it
// is known (CheckLabels).
absl::Status ValidateMixup(const MixupOptions& options);

struct MixDraw {
  double lam = 1.0;  // the weight of the batch itself; 1: not mixed
  bool cutmix = false;
  int64_t box[4] = {0, 0, 0, 0};  // CutMix: y_low, y_high, x_low, x_high (high exclusive)
  // The draws in timm's order: rand, [rand,] beta, [centre y, centre x]; for
  // tests that feed them to timm.
  std::vector<double> raw;
};

// Batch `batch` of `epoch`, for images of height x width.
MixDraw DrawMix(const MixupOptions& options, int64_t epoch, int64_t batch, int64_t height, int64_t width);

// INVALID_ARGUMENT naming the first label outside [0, num_classes).
absl::Status CheckLabels(const std::vector<int32_t>& labels, int num_classes);

// Writes the soft targets, labels.size() x num_classes float32, to `out`.
// The labels must have passed CheckLabels.
void SoftTargets(const MixupOptions& options, const MixDraw& draw, const std::vector<int32_t>& labels, float* out);

}  // namespace stoker

#endif  // STOKER_CLIENT_DEVICE_MIXUP_H_
