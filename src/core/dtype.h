// Element types of checkpoint tensors and exact conversions between them: bf16/f16 widen exactly
// to f32; MXFP4 is E2M1 codes (two per byte, low nibble = even column) with E8M0 scales per 32.
#pragma once
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sluice {

// F8_E4M3: FP8 e4m3fn (DeepSeek-V3's released weights; safetensors spells it "F8_E4M3").
enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL, F8_E4M3 };

// Size of one element in bytes.
int dtype_size(DType t);
// Safetensors spelling ("F32", "BF16", ...).
std::string_view dtype_name(DType t);
// Parses a safetensors dtype string; returns false for an unknown one.
bool parse_dtype(std::string_view s, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) return uint16_t((bits >> 16) | 0x40);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// E2M1 code (0..15) -> value; bit 3 is the sign; magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6.
extern const float kE2M1Values[16];

// E8M0 scale byte -> 2^(byte-127). Bytes 0 and 255 are rejected by loaders (see mxfp4_scale_valid).
inline float e8m0_to_f32(uint8_t b) {
  uint32_t bits = uint32_t(b) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline bool mxfp4_scale_valid(uint8_t b) { return b != 0 && b != 255; }

// The exact value of an FP8 e4m3fn byte (finite; 0x7f and 0xff are NaN).
float e4m3_to_f32(uint8_t b);
// The e4m3fn byte nearest to f (ties to the even code), saturating at ±448; NaN gives 0x7f. For
// writing test checkpoints: weights are never re-encoded.
uint8_t f32_to_e4m3(float f);

}  // namespace sluice
