// The CPU fallback's uint8 -> float conversion (client/device/tensor_convert.cc)
// against the per-element loop it replaced (a type switch and, for 16-bit
// types, a float rounding per element; kept here as the baseline), on one
// ImageNet-sized batch, in one run. Prints ms per batch and the speed-up for
// each type and layout. Usage: stoker-convert-bench [--batch N] [--side S]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/clock.h"
#include "client/device/tensor_convert.h"
#include "common/flag_names.h"

ABSL_FLAG(int, batch, 64, "Images per batch");
ABSL_FLAG(int, side, 224, "Image side in pixels");
ABSL_FLAG(int, repeats, 5, "Timed conversions per variant (the fastest counts)");

namespace stoker {
namespace {

// The baseline: the conversion as it was before issue 12.
void PerElementBaseline(const uint8_t* in, const ConvertSpec& s, void* out) {
  const int64_t plane = s.h * s.w;
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t p = 0; p < plane; ++p) {
      for (int c = 0; c < 3; ++c) {
        const int64_t o = s.layout == TensorLayout::kNCHW ? (n * 3 + c) * plane + p : (n * plane + p) * 3 + c;
        if (s.type == TensorType::kUInt8) {
          static_cast<uint8_t*>(out)[o] = in[(n * plane + p) * 3 + c];
          continue;
        }
        const float v = (static_cast<float>(in[(n * plane + p) * 3 + c]) * (1.0f / 255.0f) - s.mean[c]) * s.inv_std[c];
        switch (s.type) {
          case TensorType::kFloat32: static_cast<float*>(out)[o] = v; break;
          case TensorType::kFloat16: static_cast<uint16_t*>(out)[o] = FloatToHalf(v); break;
          case TensorType::kBFloat16: static_cast<uint16_t*>(out)[o] = FloatToBFloat16(v); break;
          case TensorType::kUInt8:
          case TensorType::kInt16: break;
        }
      }
    }
  }
}

template <typename F>
double FastestMs(F f, int repeats) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const absl::Time t0 = absl::Now();
    f();
    best = std::min(best, absl::ToDoubleMilliseconds(absl::Now() - t0));
  }
  return best;
}

int Run() {
  ConvertSpec s;
  s.n = absl::GetFlag(FLAGS_batch);
  s.h = s.w = absl::GetFlag(FLAGS_side);
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c) {
    s.mean[c] = mean[c];
    s.inv_std[c] = 1.0f / stdev[c];
  }
  std::vector<uint8_t> in(static_cast<size_t>(s.n * s.h * s.w * 3));
  std::mt19937 rng(1);
  for (uint8_t& v : in) v = static_cast<uint8_t>(rng());
  std::vector<uint8_t> a(in.size() * 4), b(in.size() * 4);
  const int repeats = absl::GetFlag(FLAGS_repeats);
  std::printf("CPU conversion of %lld images of %lldx%lld (ms per batch, fastest of %d)\n", static_cast<long long>(s.n),
              static_cast<long long>(s.h), static_cast<long long>(s.w), repeats);
  std::printf("  %-9s %-5s %12s %12s %9s\n", "type", "layout", "per-element", "table", "speed-up");
  for (TensorType type : {TensorType::kFloat32, TensorType::kFloat16, TensorType::kBFloat16, TensorType::kUInt8}) {
    for (TensorLayout layout : {TensorLayout::kNCHW, TensorLayout::kNHWC}) {
      s.type = type;
      s.layout = layout;
      const double before = FastestMs([&] { PerElementBaseline(in.data(), s, a.data()); }, repeats);
      const double after = FastestMs([&] { ConvertOnCpu(in.data(), s, b.data()); }, repeats);
      const size_t bytes = in.size() * TensorElementBytes(type);
      if (std::memcmp(a.data(), b.data(), bytes) != 0) {
        std::fprintf(stderr, "convert bench: %s %s outputs differ from the baseline\n", TensorTypeName(type),
                     layout == TensorLayout::kNCHW ? "NCHW" : "NHWC");
        return 1;
      }
      std::printf("  %-9s %-5s %12.2f %12.2f %8.2fx\n", TensorTypeName(type),
                  layout == TensorLayout::kNCHW ? "NCHW" : "NHWC", before, after, before / after);
    }
  }
  return 0;
}

}  // namespace
}  // namespace stoker

int main(int argc, char** argv) {
  stoker::ParseFlags(argc, argv, "Benchmarks the CPU fallback's conversion against the per-element baseline.");
  return stoker::Run();
}
