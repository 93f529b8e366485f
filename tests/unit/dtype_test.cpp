// Tests of src/core/dtype.h: names and sizes, bf16 and f16 conversions checked exhaustively over
// every 16-bit pattern and on random floats against independent by-hand definitions (round to
// nearest even, subnormals, infinities, NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "core/dtype.h"

namespace sluice {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

uint64_t test_seed() {
  static const uint64_t seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  return seed;
}

TEST(Dtype, NamesSizesAndParsing) {
  const DType all[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                       DType::I32, DType::I16, DType::I8,  DType::U8,   DType::BOOL, DType::F8_E4M3};
  const int sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1, 1};
  const char* names[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", "F8_E4M3"};
  for (size_t k = 0; k < std::size(all); ++k) {
    EXPECT_EQ(dtype_size(all[k]), sizes[k]);
    EXPECT_EQ(dtype_name(all[k]), names[k]);
    DType parsed;
    ASSERT_TRUE(parse_dtype(names[k], &parsed)) << names[k];
    EXPECT_EQ(parsed, all[k]);
  }
  DType parsed;
  EXPECT_FALSE(parse_dtype("F8_E5M2", &parsed));
  EXPECT_FALSE(parse_dtype("bf16", &parsed));
  EXPECT_FALSE(parse_dtype("", &parsed));
}

// ---- bf16 ----

// Exact value of a bf16 pattern by hand: sign, 8-bit exponent (bias 127), 7-bit mantissa.
double bf16_by_hand(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 7) & 0xff, mant = h & 0x7f;
  double mag;
  if (exp == 0xff) return mant ? std::numeric_limits<double>::quiet_NaN() : (sign ? -INFINITY : INFINITY);
  if (exp == 0) mag = std::ldexp(double(mant), -126 - 7);
  else mag = std::ldexp(double(128 + mant), exp - 127 - 7);
  return sign ? -mag : mag;
}

TEST(DtypeBf16, EveryPatternWidensExactlyAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(uint16_t(h));
    const double want = bf16_by_hand(uint16_t(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(f)))) << "NaN must stay NaN: " << std::hex << h;
      continue;
    }
    ASSERT_EQ(double(f), want) << std::hex << h;
    ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << std::hex << h;
    ASSERT_EQ(f32_to_bf16(f), h) << "round trip " << std::hex << h;
  }
}

// Round to nearest, ties to even, by hand: the two bf16 neighbours of f and the distance to each.
uint16_t bf16_rne_by_hand(float f) {
  const uint32_t bits = to_bits(f);
  const uint16_t down = uint16_t(bits >> 16);  // truncation toward zero
  const uint32_t rest = bits & 0xffff;
  if (rest < 0x8000) return down;
  if (rest > 0x8000) return uint16_t(down + 1);
  return (down & 1) ? uint16_t(down + 1) : down;
}

TEST(DtypeBf16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);       // tie, even stays down
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);   // tie, odd goes up
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to +inf
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000)), 0x0002);  // subnormal tie, odd goes up
  // NaN whose payload sits only in the low 16 bits must not become infinity.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0x7f800001)))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(from_bits(0xff800001)))));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));

  std::mt19937 rng{uint32_t(test_seed())};
  for (int k = 0; k < 1000000; ++k) {
    const float f = from_bits(rng());
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), bf16_rne_by_hand(f)) << std::hex << to_bits(f) << " seed " << std::dec << test_seed();
  }
}

// ---- f16 ----

// Exact value of an f16 pattern by hand: sign, 5-bit exponent (bias 15), 10-bit mantissa.
double f16_by_hand(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double mag;
  if (exp == 0x1f) return mant ? std::numeric_limits<double>::quiet_NaN() : (sign ? -INFINITY : INFINITY);
  if (exp == 0) mag = std::ldexp(double(mant), -24);
  else mag = std::ldexp(double(1024 + mant), exp - 25);
  return sign ? -mag : mag;
}

// Nearest f16 by search over the finite positive patterns (their values increase with the
// pattern), ties to the even pattern; at or beyond 65520 (halfway from 65504 to 2^16) it is inf.
uint16_t f16_rne_by_hand(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return 0x7e00;
  const double a = std::fabs(double(f));
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;  // largest pattern with value <= a
  while (lo < hi) {
    uint16_t mid = uint16_t((lo + hi + 1) / 2);
    if (f16_by_hand(mid) <= a) lo = mid;
    else hi = uint16_t(mid - 1);
  }
  if (lo == 0x7bff) return sign | lo;  // a in [65504, 65520)
  const double below = a - f16_by_hand(lo), above = f16_by_hand(uint16_t(lo + 1)) - a;
  uint16_t pick = below < above ? lo : above < below ? uint16_t(lo + 1) : (lo & 1) ? uint16_t(lo + 1) : lo;
  return sign | pick;
}

TEST(DtypeF16, EveryPatternWidensExactlyAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(uint16_t(h));
    const double want = f16_by_hand(uint16_t(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << h;
      const uint16_t back = f32_to_f16(f);
      EXPECT_EQ(back & 0x7c00, 0x7c00) << std::hex << h;
      EXPECT_NE(back & 0x3ff, 0) << "NaN must stay NaN: " << std::hex << h;
      EXPECT_EQ(back & 0x8000, h & 0x8000) << std::hex << h;
      continue;
    }
    ASSERT_EQ(double(f), want) << std::hex << h;
    ASSERT_EQ(std::signbit(f), bool(h & 0x8000)) << std::hex << h;
    ASSERT_EQ(f32_to_f16(f), h) << "round trip " << std::hex << h;
  }
}

TEST(DtypeF16, SubnormalsInfinitiesAndNaN) {
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(f16_to_f32(0xfc00), -INFINITY);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
  EXPECT_EQ(f16_to_f32(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));

  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);         // tie with 0: even wins
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);         // tie between 1 and 2: even
  EXPECT_EQ(f32_to_f16(std::ldexp(5.0f, -25)), 0x0002);         // tie between 2 and 3: even
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(f32_to_f16(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.5f, -24)), 0x0400);      // largest subnormal rounds up to normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                     // tie at the top goes to inf
  EXPECT_EQ(f32_to_f16(1.0e6f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1.0e6f), 0xfc00);
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32_to_f16(2049.0f), f32_to_f16(2048.0f));          // tie, even mantissa
  EXPECT_EQ(f32_to_f16(2051.0f), f32_to_f16(2052.0f));
  const uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
  // A NaN whose payload is only in bits f16 drops must still be NaN.
  const uint16_t low_payload = f32_to_f16(from_bits(0x7f800001));
  EXPECT_EQ(low_payload & 0x7c00, 0x7c00);
  EXPECT_NE(low_payload & 0x3ff, 0);
}

TEST(DtypeF16, RandomFloatsRoundToNearestEven) {
  std::mt19937 rng{uint32_t(test_seed() >> 7)};
  // Bit patterns cover every exponent; a second draw concentrates on the f16 range.
  std::uniform_real_distribution<float> in_range(-70000.0f, 70000.0f);
  std::uniform_int_distribution<int> small_exp(-30, 16);
  for (int k = 0; k < 300000; ++k) {
    float f;
    switch (k % 3) {
      case 0: f = from_bits(rng()); break;
      case 1: f = in_range(rng); break;
      default: f = std::ldexp(float(rng() & 0xffffff) / float(1 << 24), small_exp(rng)) * (rng() & 1 ? -1.0f : 1.0f);
    }
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), f16_rne_by_hand(f)) << std::hex << to_bits(f) << " seed " << std::dec << test_seed();
  }
}

TEST(DtypeE4m3, EncodesToTheNearestCodeTiesToEven) {
  // Every finite code encodes back to itself (the sign of zero kept).
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(uint8_t(b))), uint8_t(b)) << b;
  }
  // Halfway between neighbours goes to the even code; a hair off goes to the nearer one.
  for (int b = 0; b < 0x7e; ++b) {
    const float lo = e4m3_to_f32(uint8_t(b)), hi = e4m3_to_f32(uint8_t(b + 1));
    const float mid = 0.5f * (lo + hi);
    EXPECT_EQ(f32_to_e4m3(mid), uint8_t(b % 2 == 0 ? b : b + 1)) << b;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 0.0f)), uint8_t(b)) << b;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 1000.0f)), uint8_t(b + 1)) << b;
    EXPECT_EQ(f32_to_e4m3(-mid), uint8_t(0x80 | (b % 2 == 0 ? b : b + 1))) << b;
  }
  EXPECT_EQ(f32_to_e4m3(1e9f), 0x7e);  // saturates at 448
  EXPECT_EQ(f32_to_e4m3(-1e9f), 0xfe);
  EXPECT_EQ(f32_to_e4m3(std::nanf("")), 0x7f);
}

// The nearest code by its definition (the smallest distance over all finite codes, ties to the even
// code, saturating at ±448), for any float: make-tiny's encoder is bit arithmetic, this is a search.
uint8_t e4m3_by_search(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const double a = std::fabs(double(f));
  if (a >= 448.0) return uint8_t(sign | 0x7e);
  int best = 0;
  for (int code = 1; code <= 0x7e; ++code) {
    const double d = std::fabs(double(e4m3_to_f32(uint8_t(code))) - a), db = std::fabs(double(e4m3_to_f32(uint8_t(best))) - a);
    if (d < db || (d == db && code % 2 == 0)) best = code;
  }
  return uint8_t(sign | best);
}

TEST(DtypeE4m3, EncoderIsTheNearestCodeForAnyFloat) {
  std::mt19937 rng{uint32_t(test_seed() + 7)};
  std::uniform_int_distribution<int> exp(-14, 10);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::ldexp(float(rng() & 0xffffff) / float(1 << 24), exp(rng)) * (rng() & 1 ? -1.0f : 1.0f);
    ASSERT_EQ(f32_to_e4m3(f), e4m3_by_search(f)) << std::hexfloat << f;
  }
  for (float f : {448.0f, 447.99997f, 464.0f, 0x1p-6f, 0x1.fffffep-7f, 0x1p-10f, 0x1.000002p-10f, 0.0f, -0.0f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::infinity()})
    EXPECT_EQ(f32_to_e4m3(f), e4m3_by_search(f)) << std::hexfloat << f;
}

}  // namespace
}  // namespace sluice
