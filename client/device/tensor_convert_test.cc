#include "client/device/tensor_convert.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace stoker {
namespace {

TEST(TensorConvertTest, HalfAndBFloat16KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);                   // overflow to infinity
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);                   // rounded to nearest
  EXPECT_EQ(FloatToHalf(5.960464477539063e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(1e-9f), 0x0000);
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-0.5f), 0xbf00);
  EXPECT_EQ(FloatToBFloat16(1.00390625f), 0x3f80);  // exactly half-way: to even
  EXPECT_EQ(FloatToBFloat16(1.01171875f), 0x3f82);  // half-way above odd: up
}

TEST(TensorConvertTest, EveryHalfRoundTripsAndTiesGoToEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN payloads
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
  // 1 + 2^-11 lies half-way between 1 and the next half (1 + 2^-10).
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

// A plain reference in double precision.
double Reference(uint8_t v, int c, const ConvertSpec& s) { return (v / 255.0 - s.mean[c]) * s.inv_std[c]; }

TEST(TensorConvertTest, Uint8OutputKeepsThePixelsInEitherLayoutAndNamesParse) {
  ConvertSpec s;
  s.n = 2;
  s.h = 1;
  s.w = 2;
  s.type = TensorType::kUInt8;
  s.mean[0] = 0.5f;  // ignored for uint8
  const std::vector<uint8_t> in = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<uint8_t> out(in.size());
  s.layout = TensorLayout::kNHWC;
  ConvertOnCpu(in.data(), s, out.data());
  EXPECT_EQ(out, in);
  s.layout = TensorLayout::kNCHW;
  ConvertOnCpu(in.data(), s, out.data());
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 4, 2, 5, 3, 6, 7, 10, 8, 11, 9, 12}));
  EXPECT_EQ(TensorElementBytes(TensorType::kUInt8), 1u);
  TensorType t = TensorType::kFloat32;
  EXPECT_TRUE(ParseTensorType("bfloat16", &t));
  EXPECT_EQ(t, TensorType::kBFloat16);
  EXPECT_TRUE(ParseTensorType("uint8", &t));
  EXPECT_EQ(t, TensorType::kUInt8);
  EXPECT_FALSE(ParseTensorType("int8", &t));
}

TEST(TensorConvertTest, CpuConversionMatchesAPlainReferenceForEveryTypeAndLayout) {
  std::mt19937 rng(7);
  ConvertSpec base;
  base.n = 3;
  base.h = 5;
  base.w = 7;
  const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c) {
    base.mean[c] = mean[c];
    base.inv_std[c] = 1.0f / std[c];
  }
  std::vector<uint8_t> in(static_cast<size_t>(base.n * base.h * base.w * 3));
  for (auto& v : in) v = static_cast<uint8_t>(1 + rng() % 255);  // never all zeros
  for (TensorType type : {TensorType::kFloat32, TensorType::kFloat16, TensorType::kBFloat16}) {
    for (TensorLayout layout : {TensorLayout::kNCHW, TensorLayout::kNHWC}) {
      ConvertSpec s = base;
      s.type = type;
      s.layout = layout;
      std::vector<uint8_t> out(in.size() * TensorElementBytes(type));
      ConvertOnCpu(in.data(), s, out.data());
      for (int64_t n = 0; n < s.n; ++n) {
        for (int64_t y = 0; y < s.h; ++y) {
          for (int64_t x = 0; x < s.w; ++x) {
            for (int c = 0; c < 3; ++c) {
              const uint8_t v = in[static_cast<size_t>(((n * s.h + y) * s.w + x) * 3 + c)];
              const int64_t o =
                  layout == TensorLayout::kNCHW ? ((n * 3 + c) * s.h + y) * s.w + x : ((n * s.h + y) * s.w + x) * 3 + c;
              double got;
              double tolerance;
              if (type == TensorType::kFloat32) {
                got = reinterpret_cast<const float*>(out.data())[o];
                tolerance = 1e-5;
              } else {
                const uint16_t bits = reinterpret_cast<const uint16_t*>(out.data())[o];
                got = type == TensorType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
                tolerance = type == TensorType::kFloat16 ? 2e-3 : 1.6e-2;  // half an ulp near |2.6|
              }
              ASSERT_NEAR(got, Reference(v, c, s), tolerance)
                  << TensorTypeName(type) << " layout " << static_cast<int>(layout) << " at " << o;
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace stoker
