// The decode tables of decode_tables.h, from core/dtype.h's scalar definitions.
#include "device/cpu/decode_tables.h"

#include <cstring>

#include "core/dtype.h"

namespace sluice::device {

const E4m3Bf16Bytes& e4m3_bf16_bytes() {
  static const E4m3Bf16Bytes table = [] {
    E4m3Bf16Bytes t{};
    for (int code = 0; code < 128; ++code) {
      const float v = e4m3_to_f32(uint8_t(code));
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      // Exact: an e4m3 value has at most 4 significant bits, so the low 16 bits are zero (a NaN
      // keeps its quiet bit, which sits in the high half).
      const uint16_t b = uint16_t(bits >> 16);
      t.lo[code] = uint8_t(b & 0xff);
      t.hi[code] = uint8_t(b >> 8);
    }
    return t;
  }();
  return table;
}

const float* int4_mantissa_values() {
  struct alignas(64) Table {
    float v[128][16];
  };
  static const Table table = [] {
    Table t{};
    for (int m = 0; m < 128; ++m)
      for (int code = 0; code < 16; ++code)
        t.v[m][code] = bf16_to_f32(f32_to_bf16(float((code - 8) * (128 + m))));
    return t;
  }();
  return &table.v[0][0];
}

}  // namespace sluice::device
