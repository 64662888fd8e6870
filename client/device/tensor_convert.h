// The last step before the training step: uint8 NHWC RGB images to a float
// tensor (float32, float16 or bfloat16) in NCHW or NHWC, optionally
// normalized per channel: (value / 255 - mean[c]) / std[c]; or to uint8 in
// either layout (the pixels unchanged, for models that convert on their own). The CPU version
// lives in tensor_convert.cc; the CUDA kernel in tensor_convert.cu computes the
// same values (float32 arithmetic, round-to-nearest-even to 16 bits). Pure
// functions; thread-safe.
#ifndef STOKER_CLIENT_DEVICE_TENSOR_CONVERT_H_
#define STOKER_CLIENT_DEVICE_TENSOR_CONVERT_H_

#include <cstddef>
#include <cstdint>

namespace stoker {

// kInt16: audio(format=int16) waveforms, handed over as they arrived (never
// converted; not a type images are asked for in).
enum class TensorType { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kUInt8 = 3, kInt16 = 4 };
enum class TensorLayout { kNCHW = 0, kNHWC = 1 };

struct ConvertSpec {
  int64_t n = 0, h = 0, w = 0;  // images, rows, columns; 3 channels (RGB)
  TensorType type = TensorType::kFloat32;
  TensorLayout layout = TensorLayout::kNCHW;
  // out = (in / 255 - mean[c]) * inv_std[c]; identity: mean 0, inv_std 1.
  // kUInt8 ignores both: out = in.
  float mean[3] = {0, 0, 0};
  float inv_std[3] = {1, 1, 1};
  // MixUp / CutMix (client/mixup.h), float types only: image i is mixed with
  // image n-1-i after its conversion to float. MixUp: mix_self x own +
  // mix_other x partner (two float32 products and their sum, each rounded, as
  // torch's mul_ and add_ on float32; then the one rounding to 16 bits).
  // CutMix: the box [box[0], box[1]) x [box[2], box[3]) (rows x columns) is
  // the partner's. mix_self 1 and cutmix false: no mixing.
  float mix_self = 1.0f, mix_other = 0.0f;
  bool cutmix = false;
  int64_t box[4] = {0, 0, 0, 0};

  bool mixes() const { return cutmix || mix_self != 1.0f; }
  // An audio batch (layout AUDIO): float32 the server computed, handed over
  // as it arrived, in the batch's own shape; nothing is converted.
  bool raw = false;
};

size_t TensorElementBytes(TensorType type);
const char* TensorTypeName(TensorType type);

// The parsed names "float32", "float16", "bfloat16", "uint8"; false otherwise.
bool ParseTensorType(const char* name, TensorType* type);

// CPU reference and fallback: in is n*h*w*3 uint8 (NHWC), out has room for
// n*3*h*w elements of spec.type.
void ConvertOnCpu(const uint8_t* in, const ConvertSpec& spec, void* out);

// IEEE binary16 and bfloat16 from float, rounding to nearest even (NaN kept).
uint16_t FloatToHalf(float f);
uint16_t FloatToBFloat16(float f);
float HalfToFloat(uint16_t h);
float BFloat16ToFloat(uint16_t b);

}  // namespace stoker

#endif  // STOKER_CLIENT_DEVICE_TENSOR_CONVERT_H_
