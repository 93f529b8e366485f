// Weights as every device sees them: a [rows, cols] matrix in one of the formats checkpoints ship
// (F32, BF16, MXFP4 with E8M0 block scales, FP8 e4m3 with F32 128x128 block scales, INT4 with BF16
// scales per 32 columns), an optional bias, and the place its bytes live (host RAM or a device's memory). The store hands routed
// experts out as ExpertViews of such weights; a Fence says when a view's bytes are ready.
//
// Batch invariance (the contract of every device, every op): the value written for output row r of
// input row i depends only on the weights and on input row i, never on how many rows the pass has,
// on the row range a thread or block takes, on the launch grid or on timing. Multi-position passes
// therefore equal token-by-token passes bit for bit, which is what makes drafting on and off give
// identical greedy tokens and a verify pass commit exactly the state of the shorter run.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace sluice::device {

// Where bytes live. Host memory may be read by the CPU; Device memory only by the device that owns
// it (model code never dereferences either: it passes views to ops).
enum class Place : uint8_t { Host, Device };

enum class WeightType : uint8_t { F32, BF16, MXFP4, FP8_E4M3, INT4_G32 };
const char* weight_type_name(WeightType t);

// FP8 weights carry one F32 scale per kFp8Block x kFp8Block block of the matrix (row-major
// [ceil(rows/128), ceil(cols/128)], DeepSeek-V3's weight_scale_inv); edge blocks are partial.
inline constexpr int64_t kFp8Block = 128;

// INT4_G32 is compressed-tensors' pack-quantized symmetric int4 with group size 32 (Kimi-K2-Thinking's
// routed experts): eight 4-bit codes per uint32, element 8g+i of a row in bits [4i, 4i+4) of word g,
// each code q + 8 for q in [-8, 7]; one BF16 scale s per 32 columns of a row. The weight's value is
// bf16(q·s): the exact product rounded to BF16 (to nearest even), which is what compressed-tensors'
// dequantization computes, widened exactly to fp32. cols is a multiple of kInt4Group.
inline constexpr int64_t kInt4Group = 32;

// The 16 values of one INT4_G32 group, indexed by code (q + 8): bf16(q·s) widened to fp32. q·s is
// exact in fp32 (4 bits times 8), so rounding it once to BF16 gives bf16(q·s).
inline void int4_group_values(uint16_t scale_bf16, float out[16]) {
  const float s = bf16_to_f32(scale_bf16);
  for (int code = 0; code < 16; ++code) out[code] = bf16_to_f32(f32_to_bf16(float(code - 8) * s));
}

// Whether `count` e4m3 bytes hold a NaN code (0x7f or 0xff): eight bytes at a time, (b & 0x7f) + 1
// carries into bit 7 of its own byte only for 0x7f.
inline bool fp8_has_nan_code(const uint8_t* p, size_t count) {
  constexpr uint64_t low7 = 0x7f7f7f7f7f7f7f7full, ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
  uint64_t hit = 0;
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    uint64_t v;
    __builtin_memcpy(&v, p + i, 8);
    hit |= ((v & low7) + ones) & high;
  }
  for (; i < count; ++i) hit |= ((p[i] & 0x7fu) == 0x7fu);
  return hit != 0;
}

// The 256 e4m3 values, indexed by the byte (e4m3_to_f32: exact; NaN for 0x7f and 0xff).
inline const float* e4m3_table() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int b = 0; b < 256; ++b) t[size_t(b)] = e4m3_to_f32(uint8_t(b));
    return t;
  }();
  return table.data();
}

// A [rows, cols] weight stored row-major as in PyTorch ([out, in]).
struct Weight {
  WeightType type = WeightType::F32;
  int64_t rows = 0, cols = 0;
  // F32: float[rows*cols]; BF16: uint16_t[rows*cols]; MXFP4: uint8_t[rows*cols/2] (low nibble =
  // even column); FP8_E4M3: uint8_t[rows*cols]; INT4_G32: uint32_t[rows*cols/8] (kInt4Group).
  const void* data = nullptr;
  // MXFP4: E8M0 bytes [rows, cols/32]; FP8_E4M3: float [ceil(rows/128), ceil(cols/128)];
  // INT4_G32: BF16 [rows, cols/32].
  const void* scales = nullptr;
  // Optional bias [rows] (F32 or BF16), added after the product: y = (W·x) + b.
  const void* bias = nullptr;
  DType bias_type = DType::F32;
  Place place = Place::Host;
  // FP8_E4M3: whoever made the view checked that data holds no NaN code (0x7f, 0xff; valid
  // checkpoints never do), so the SIMD products skip the per-block scan that otherwise finds them
  // (a NaN code makes its row NaN, as in the scalar kernel). Same bits either way when unset.
  bool fp8_finite = false;

  bool empty() const { return data == nullptr; }
};

// out[i] = W[r, i] widened for an FP8 weight (4-byte aligned scales): the e4m3 value times its
// 128x128 block's scale, one fp32 product (DeepSeek's dequantization), through the table of exact
// values (never an fp32 subnormal operand: Intel cores take a microcode assist for each). The
// CPU device widens through its ISA's widen_fp8 (device/cpu/kernels.h), which gives these bits.
inline void fp8_widen_row(const Weight& w, int64_t r, float* out) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.cols;
  const float* s = static_cast<const float*>(w.scales) + (r / kFp8Block) * ((w.cols + kFp8Block - 1) / kFp8Block);
  const float* lut = e4m3_table();
  for (int64_t c0 = 0; c0 < w.cols; c0 += kFp8Block) {
    const float scale = s[c0 / kFp8Block];
    const int64_t c1 = c0 + kFp8Block < w.cols ? c0 + kFp8Block : w.cols;
    for (int64_t i = c0; i < c1; ++i) out[i] = lut[row[i]] * scale;
  }
}

// The bytes a weight's parts occupy: its values, its block scales and its bias.
inline size_t weight_data_bytes(const Weight& w) {
  const size_t n = size_t(w.rows) * size_t(w.cols);
  switch (w.type) {
    case WeightType::F32: return n * 4;
    case WeightType::BF16: return n * 2;
    case WeightType::MXFP4: return n / 2;
    case WeightType::FP8_E4M3: return n;
    case WeightType::INT4_G32: return n / 2;
  }
  return 0;
}
inline size_t weight_scale_bytes(const Weight& w) {
  switch (w.type) {
    case WeightType::MXFP4: return size_t(w.rows) * size_t(w.cols) / 32;
    case WeightType::FP8_E4M3:
      return size_t((w.rows + kFp8Block - 1) / kFp8Block) * size_t((w.cols + kFp8Block - 1) / kFp8Block) * 4;
    case WeightType::INT4_G32: return size_t(w.rows) * size_t(w.cols / kInt4Group) * 2;
    default: return 0;
  }
}
inline size_t weight_bias_bytes(const Weight& w) {
  return w.bias ? size_t(w.rows) * (w.bias_type == DType::BF16 ? 2 : 4) : 0;
}
inline size_t weight_bytes(const Weight& w) {
  return w.empty() ? 0 : weight_data_bytes(w) + (w.scales ? weight_scale_bytes(w) : 0) + weight_bias_bytes(w);
}

// Calls f(pointer member, bytes) for each part of a weight that is there (values, scales, bias), in
// that order; f may repoint the member (a copy of an expert's record elsewhere).
template <typename F>
void for_each_piece(Weight& w, F&& f) {
  if (w.empty()) return;
  f(w.data, weight_data_bytes(w));
  if (w.scales) f(w.scales, weight_scale_bytes(w));
  if (w.bias) f(w.bias, weight_bias_bytes(w));
}

// Orders work across a device's queues. On the CPU every fence has passed when it is made; on a GPU
// it wraps an event. A default Fence has always passed.
struct Fence {
  void* impl = nullptr;
  uint64_t value = 0;
};

// One routed expert's weights as the store hands them out (w1 gate, w3 up, w2 down). `ready` is the
// fence after which the bytes are valid on the view's place; valid until the provider's release().
// gpt-oss ships gate and up as one matrix with their rows interleaved (gate unit i is row 2i, up
// unit i row 2i + 1): then `gate` is that [2·intermediate, input] matrix (bias likewise
// interleaved), `up` is empty and gate_up_interleaved is set.
struct ExpertView {
  Weight gate;  // [intermediate, input], or the interleaved [2·intermediate, input]
  Weight up;    // [intermediate, input]
  Weight down;  // [input, intermediate]
  Fence ready;
  bool gate_up_interleaved = false;
  // A GPU host's plan computes this expert on the host's cores from RAM (store/device_tier.h):
  // the model runs it on the CPU device and moves only its output rows to the GPU.
  bool compute_on_host = false;
  int64_t intermediate() const { return gate_up_interleaved ? gate.rows / 2 : gate.rows; }
};

}  // namespace sluice::device
