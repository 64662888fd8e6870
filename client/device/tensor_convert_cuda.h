// Launcher for the CUDA conversion kernel (tensor_convert.cu). Only built
// with STOKER_CUDA; thread-safe (stream-ordered).
#ifndef STOKER_CLIENT_DEVICE_TENSOR_CONVERT_CUDA_H_
#define STOKER_CLIENT_DEVICE_TENSOR_CONVERT_CUDA_H_

#include <cuda_runtime.h>

#include "client/device/tensor_convert.h"

namespace stoker {

// Enqueues the conversion of device_in (uint8 NHWC) into device_out on stream.
cudaError_t LaunchConvert(const uint8_t* device_in, const ConvertSpec& spec, void* device_out, cudaStream_t stream);

}  // namespace stoker

#endif  // STOKER_CLIENT_DEVICE_TENSOR_CONVERT_CUDA_H_
