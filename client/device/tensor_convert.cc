#include "client/device/tensor_convert.h"

#include <cstring>
#include <initializer_list>

namespace stoker {

size_t TensorElementBytes(TensorType type) {
  switch (type) {
    case TensorType::kFloat32: return 4;
    case TensorType::kFloat16:
    case TensorType::kBFloat16:
    case TensorType::kInt16: return 2;
    case TensorType::kUInt8: return 1;
  }
  return 4;
}

bool ParseTensorType(const char* name, TensorType* type) {
  for (TensorType t : {TensorType::kFloat32, TensorType::kFloat16, TensorType::kBFloat16, TensorType::kUInt8}) {
    if (std::strcmp(name, TensorTypeName(t)) == 0) {
      *type = t;
      return true;
    }
  }
  return false;
}

const char* TensorTypeName(TensorType type) {
  switch (type) {
    case TensorType::kFloat32: return "float32";
    case TensorType::kFloat16: return "float16";
    case TensorType::kBFloat16: return "bfloat16";
    case TensorType::kUInt8: return "uint8";
    case TensorType::kInt16: return "int16";
  }
  return "?";
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);                                                      // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t x = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);   // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow (rounds to inf)
  if (abs < 0x38800000) {                                              // subnormal half (or zero)
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);          // below half the smallest subnormal
    const uint32_t mant = (abs & 0x7fffff) | 0x800000;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14..24
    uint32_t v = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1))) ++v;
    return static_cast<uint16_t>(sign | v);
  }
  uint32_t v = ((abs >> 13) - (112u << 10));  // rebias exponent 127 -> 15
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) ++v;
  return static_cast<uint16_t>(sign | v);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalize
      int e = -1;
      uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while (!(m & 0x400));
      x = sign | ((112 - e) << 23) | ((m & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000 | (mant << 13);
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

// Every output element is a function of its channel and one uint8 value, so
// each channel's 256 possible outputs are computed once (with the same
// float32 arithmetic and rounding as the CUDA kernel) and the conversion is a
// table look-up per element: no per-element type switch and no per-element
// float-to-16-bit rounding.
template <typename T>
struct Lut {
  T value[3][256];
};

template <typename T, typename Convert>
void Fill(const ConvertSpec& s, Convert convert, Lut<T>* lut) {
  for (int c = 0; c < 3; ++c) {
    for (int v = 0; v < 256; ++v) {
      lut->value[c][v] = convert((static_cast<float>(v) * (1.0f / 255.0f) - s.mean[c]) * s.inv_std[c]);
    }
  }
}

template <typename T>
void Apply(const uint8_t* in, const ConvertSpec& s, const Lut<T>& lut, T* out) {
  const int64_t plane = s.h * s.w;
  for (int64_t n = 0; n < s.n; ++n) {
    const uint8_t* src = in + n * plane * 3;
    if (s.layout == TensorLayout::kNHWC) {
      T* dst = out + n * plane * 3;
      for (int64_t p = 0; p < plane; ++p) {
        dst[3 * p] = lut.value[0][src[3 * p]];
        dst[3 * p + 1] = lut.value[1][src[3 * p + 1]];
        dst[3 * p + 2] = lut.value[2][src[3 * p + 2]];
      }
    } else {
      for (int c = 0; c < 3; ++c) {
        T* dst = out + (n * 3 + c) * plane;
        const T* table = lut.value[c];
        for (int64_t p = 0; p < plane; ++p) dst[p] = table[src[3 * p + c]];
      }
    }
  }
}

// The mixed conversion: each output element from its own and its partner's
// float values (this file is built with -ffp-contract=off, so that the
// product and the sum round as torch's do).
template <typename T, typename Convert>
void ApplyMixed(const uint8_t* in, const ConvertSpec& s, const Lut<float>& value, Convert convert, T* out) {
  const int64_t plane = s.h * s.w;
  for (int64_t n = 0; n < s.n; ++n) {
    const uint8_t* own = in + n * plane * 3;
    const uint8_t* partner = in + (s.n - 1 - n) * plane * 3;
    for (int64_t p = 0; p < plane; ++p) {
      const int64_t y = p / s.w, x = p % s.w;
      const bool pasted = s.cutmix && y >= s.box[0] && y < s.box[1] && x >= s.box[2] && x < s.box[3];
      for (int c = 0; c < 3; ++c) {
        float v;
        if (s.cutmix) {
          v = value.value[c][(pasted ? partner : own)[3 * p + c]];
        } else {
          const float a = value.value[c][own[3 * p + c]] * s.mix_self;
          const float b = value.value[c][partner[3 * p + c]] * s.mix_other;
          v = a + b;
        }
        const int64_t o = s.layout == TensorLayout::kNHWC ? (n * plane + p) * 3 + c : (n * 3 + c) * plane + p;
        out[o] = convert(v);
      }
    }
  }
}

template <typename T, typename Convert>
void ConvertWith(const uint8_t* in, const ConvertSpec& s, Convert convert, void* out) {
  if (s.mixes()) {
    Lut<float> value;
    Fill(
        s, [](float v) { return v; }, &value);
    return ApplyMixed(in, s, value, convert, static_cast<T*>(out));
  }
  Lut<T> lut;
  Fill(s, convert, &lut);
  Apply(in, s, lut, static_cast<T*>(out));
}

}  // namespace

void ConvertOnCpu(const uint8_t* in, const ConvertSpec& s, void* out) {
  switch (s.type) {                   // once per batch
    case TensorType::kInt16: return;  // audio: never converted (SpecFor's raw)
    case TensorType::kFloat32:
      return ConvertWith<float>(
          in, s, [](float v) { return v; }, out);
    case TensorType::kFloat16: return ConvertWith<uint16_t>(in, s, FloatToHalf, out);
    case TensorType::kBFloat16: return ConvertWith<uint16_t>(in, s, FloatToBFloat16, out);
    case TensorType::kUInt8: {
      const int64_t plane = s.h * s.w;
      if (s.layout == TensorLayout::kNHWC) {
        std::memcpy(out, in, static_cast<size_t>(s.n * plane * 3));
        return;
      }
      Lut<uint8_t> identity;
      for (int c = 0; c < 3; ++c) {
        for (int v = 0; v < 256; ++v) identity.value[c][v] = static_cast<uint8_t>(v);
      }
      return Apply(in, s, identity, static_cast<uint8_t*>(out));
    }
  }
}

}  // namespace stoker
