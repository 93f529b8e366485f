// Four fp32 lanes side by side, each one independent scalar computation: a v4 operation is the
// IEEE operation of each lane, so a loop whose lanes are different rows (or positions) gives the
// scalar loop's bits in every lane. Users are compiled with -ffp-contract=off (a product is
// rounded before its sum, as in the scalar oracle); GCC/Clang vector extensions, SSE2 at least.
#pragma once
#include <cstdint>
#include <cstring>

#include "device/mathf.h"

namespace sluice::device::lanes {

typedef float v4 __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

inline v4 load4(const float* p) {
  v4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float* p, v4 v) { std::memcpy(p, &v, sizeof v); }
inline v4 splat4(float x) { return v4{x, x, x, x}; }

// mathf::exp in each lane, bit for bit. The common case (every lane in [-87, 88], where no
// special value arises and 2^k is one normal scaling) runs as vectors, with rint as the
// round-to-nearest-even of adding and removing 1.5·2^23 (exact for |k| < 2^22); any other lane
// set (NaN, overflow, underflow, subnormal results) goes through mathf::exp lane by lane.
inline v4 exp4(v4 x) {
  const v4i ok = (x >= splat4(-87.0f)) & (x <= splat4(88.0f));
  if (!(ok[0] & ok[1] & ok[2] & ok[3])) {
    return v4{mathf::exp(x[0]), mathf::exp(x[1]), mathf::exp(x[2]), mathf::exp(x[3])};
  }
  const v4 magic = splat4(12582912.0f);  // 1.5·2^23
  const v4 k = (x * splat4(1.44269502f) + magic) - magic;
  const v4 r = (x - k * splat4(0.693145752f)) - k * splat4(1.42860677e-06f);
  v4 p = splat4(2.48015873e-05f);
  p = p * r + splat4(1.98412698e-04f);
  p = p * r + splat4(1.38888889e-03f);
  p = p * r + splat4(8.33333333e-03f);
  p = p * r + splat4(4.16666667e-02f);
  p = p * r + splat4(1.66666667e-01f);
  p = p * r + splat4(0.5f);
  p = p * r + splat4(1.0f);
  p = p * r + splat4(1.0f);
  const v4i bits = (__builtin_convertvector(k, v4i) + 127) << 23;
  v4 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace sluice::device::lanes
