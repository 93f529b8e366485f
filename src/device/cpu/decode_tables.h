// Lookup tables the SIMD products decode weights through, built once from the scalar definitions
// in core/dtype.h and device/weight.h (so a table and the scalar oracle cannot disagree). Built in
// a file compiled for the baseline ISA: the *_avx512.cpp and *_vbmi.cpp files only read them.
#pragma once
#include <cstdint>

namespace sluice::device {

// The bf16 bit pattern of every e4m3 magnitude code (the byte's low 7 bits), split into its low and
// high bytes: bf16 holds every e4m3 value exactly, subnormal codes as normal numbers (an e4m3
// subnormal is at least 2^-9), so a weight decoded through the table is never an fp32 subnormal.
// The NaN code 0x7f maps to a quiet NaN. The sign is the byte's bit 7, ORed into the high byte.
struct E4m3Bf16Bytes {
  alignas(64) uint8_t lo[128];
  alignas(64) uint8_t hi[128];
};
const E4m3Bf16Bytes& e4m3_bf16_bytes();

// INT4_G32's values by scale mantissa: row m (the BF16 scale's 7 stored mantissa bits) holds, by
// code (q + 8), bf16(q · (128 + m)) as fp32. For a scale s = ±(128 + m)·2^(E-134) with
// 8 <= E <= 250 (exponent field E), bf16(q·s) = row[code] · (±2^(E-134)) exactly: rounding to 8
// significant bits does not depend on a power-of-two factor while everything stays normal and
// finite, which that range of E guarantees (kInt4FastScaleMin/Max). 128 rows of 16, 64-byte aligned.
inline constexpr uint32_t kInt4FastExponentMin = 8, kInt4FastExponentMax = 250;
const float* int4_mantissa_values();

}  // namespace sluice::device
