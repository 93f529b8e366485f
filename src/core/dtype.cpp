// Element type names, sizes and the f16 conversions.
#include "core/dtype.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace sluice {

const float kE2M1Values[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

int dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: return 2;
    case DType::I8: case DType::U8: case DType::BOOL: case DType::F8_E4M3: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F64: return "F64";
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::I16: return "I16";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::BOOL: return "BOOL";
    case DType::F8_E4M3: return "F8_E4M3";
  }
  return "?";
}

bool parse_dtype(std::string_view s, DType* out) {
  static const DType all[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                              DType::I32, DType::I16, DType::I8,  DType::U8,   DType::BOOL, DType::F8_E4M3};
  for (DType t : all) {
    if (dtype_name(t) == s) {
      *out = t;
      return true;
    }
  }
  return false;
}

float e4m3_to_f32(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
  if (exp == 15 && man == 7) return std::numeric_limits<float>::quiet_NaN();
  const float mag = exp == 0 ? std::ldexp(float(man), -9) : std::ldexp(float(8 + man), exp - 10);
  return sign ? -mag : mag;
}

uint8_t f32_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a >= 448.0f) return uint8_t(sign | 0x7e);  // saturate (the largest finite code)
  if (a < 0x1p-6f) {
    // Subnormal codes are multiples of 2^-9 (code 8, 2^-6, is the smallest normal): a·2^9 is
    // exact, and rounding it to an integer, ties to even, is rounding to the nearest code.
    return uint8_t(sign | uint8_t(std::nearbyint(a * 512.0f)));
  }
  // A normal e4m3 value is an fp32 whose mantissa has 3 bits: round the other 20 to nearest even
  // (a carry moves into the exponent), then rebias the exponent from 127 to 7.
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  const uint32_t rounded = (bits + 0x7ffffu + ((bits >> 20) & 1u)) >> 20;
  return uint8_t(sign | (rounded - ((127u - 7u) << 3)));
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400u));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int32_t exp = int32_t((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mant = bits & 0x7fffffu;
  if (((bits >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = 1u << (shift - 1);
    uint32_t rounded = (mant + half - 1 + ((mant >> shift) & 1)) >> shift;
    return uint16_t(sign | rounded);
  }
  uint32_t rounded = (mant + 0xfffu + ((mant >> 13) & 1)) >> 13;
  uint32_t out = sign | uint32_t(exp) << 10;
  return uint16_t(out + rounded);  // a mantissa carry correctly bumps the exponent
}

}  // namespace sluice
