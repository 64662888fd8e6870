// CUDA version of ConvertOnCpu (see tensor_convert.h): one thread per output
// element, the same float32 arithmetic, and the device's round-to-nearest-even
// conversions to 16 bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "client/device/tensor_convert_cuda.h"

namespace stoker {
namespace {

// Element (image n, pixel p, channel c) converted to float, as ConvertOnCpu.
__device__ float Value(const uint8_t* __restrict__ in, const ConvertSpec& s, int64_t n, int64_t p, int c) {
  const int64_t plane = s.h * s.w;
  // The expression (and so the compiler's contraction of it) as before the
  // mixing was added: unmixed batches keep their bytes.
  return (static_cast<float>(in[(n * plane + p) * 3 + c]) * (1.0f / 255.0f) - s.mean[c]) * s.inv_std[c];
}

__global__ void ConvertKernel(const uint8_t* __restrict__ in, ConvertSpec s, void* __restrict__ out) {
  const int64_t plane = s.h * s.w;
  const int64_t total = s.n * plane * 3;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total; o += int64_t{gridDim.x} * blockDim.x) {
    int64_t n, p;
    int c;
    if (s.layout == TensorLayout::kNCHW) {
      n = o / (3 * plane);
      c = static_cast<int>((o / plane) % 3);
      p = o % plane;
    } else {
      n = o / (3 * plane);
      p = (o / 3) % plane;
      c = static_cast<int>(o % 3);
    }
    if (s.type == TensorType::kUInt8) {
      static_cast<uint8_t*>(out)[o] = in[(n * plane + p) * 3 + c];
      continue;
    }
    float v = Value(in, s, n, p, c);
    if (s.cutmix) {
      const int64_t y = p / s.w, x = p % s.w;
      if (y >= s.box[0] && y < s.box[1] && x >= s.box[2] && x < s.box[3]) v = Value(in, s, s.n - 1 - n, p, c);
    } else if (s.mix_self != 1.0f) {
      // Rounded as the CPU path and torch's mul_/add_: no fused multiply-add.
      v = __fadd_rn(__fmul_rn(v, s.mix_self), __fmul_rn(Value(in, s, s.n - 1 - n, p, c), s.mix_other));
    }
    switch (s.type) {
      case TensorType::kFloat32: static_cast<float*>(out)[o] = v; break;
      case TensorType::kFloat16: static_cast<__half*>(out)[o] = __float2half_rn(v); break;
      case TensorType::kBFloat16: static_cast<__nv_bfloat16*>(out)[o] = __float2bfloat16_rn(v); break;
      case TensorType::kUInt8:
      case TensorType::kInt16: break;
    }
  }
}

}  // namespace

cudaError_t LaunchConvert(const uint8_t* device_in, const ConvertSpec& spec, void* device_out, cudaStream_t stream) {
  const int64_t total = spec.n * spec.h * spec.w * 3;
  if (total == 0) return cudaSuccess;
  const int threads = 256;
  const int64_t blocks = (total + threads - 1) / threads;
  ConvertKernel<<<static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8), threads, 0, stream>>>(device_in, spec,
                                                                                                        device_out);
  return cudaGetLastError();
}

}  // namespace stoker
