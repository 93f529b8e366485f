// CPU kernel tests: every SIMD product against the scalar oracle on fresh random inputs (odd
// sizes included), batch invariance (n = 1 vs batched, row splits, threaded, strided) bit for bit
// on every ISA, and exact MXFP4 and INT4 decoding of all codes, positions and extreme scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <xmmintrin.h>

#include "core/dtype.h"
#include "core/error.h"
#include "device/cpu/kernels.h"
#include "test_seed.h"

namespace sluice::device {
namespace {

using testing::test_seed;

// Random weights of one type in the layout the kernels read, with owned storage.
struct TestWeight {
  Weight w;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> packed, scales;
  std::vector<float> block_scales;  // FP8
  std::vector<uint32_t> words;      // INT4_G32 codes
  std::vector<uint16_t> group_scales;
};

// bf16(v) from its definition, independently of f32_to_bf16: v rounded to 8 significant bits
// (to nearest, ties to even; multiples of 2^-133 below 2^-126), infinite past the largest finite.
double bf16_by_definition(double v) {
  if (v == 0.0) return v;
  const int e = std::max(std::ilogb(v), -126);
  const double ulp = std::ldexp(1.0, e - 7);
  const double r = std::nearbyint(std::fabs(v) / ulp) * ulp;  // the default rounding mode: ties to even
  return std::copysign(r >= std::ldexp(1.0, 128) ? HUGE_VAL : r, v);
}

// W[r, c] of an INT4_G32 weight from the format's definition (compressed-tensors pack-quantized):
// code = bits [4j, 4j+4) of word c/8 of the row, j = c % 8; q = code - 8; value bf16(q·s).
double int4_by_definition(const Weight& w, int64_t r, int64_t c) {
  const uint32_t word = static_cast<const uint32_t*>(w.data)[r * (w.cols / 8) + c / 8];
  const int q = int((word >> (4 * (c % 8))) & 15) - 8;
  const uint16_t s = static_cast<const uint16_t*>(w.scales)[r * (w.cols / 32) + c / 32];
  return bf16_by_definition(double(q) * double(bf16_to_f32(s)));
}

// MXFP4 scales near 2^0 keep random products well inside the normal range; extreme bytes are
// covered by dedicated tests.
TestWeight random_weight(WeightType type, int64_t rows, int64_t cols, std::mt19937_64& rng) {
  TestWeight t;
  t.w.type = type;
  t.w.rows = rows;
  t.w.cols = cols;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  switch (type) {
    case WeightType::F32:
      t.f32.resize(static_cast<size_t>(rows * cols));
      for (float& v : t.f32) v = normal(rng);
      t.w.data = t.f32.data();
      break;
    case WeightType::BF16:
      t.bf16.resize(static_cast<size_t>(rows * cols));
      for (uint16_t& v : t.bf16) v = f32_to_bf16(normal(rng));
      t.w.data = t.bf16.data();
      break;
    case WeightType::MXFP4: {
      t.packed.resize(static_cast<size_t>(rows * cols / 2));
      t.scales.resize(static_cast<size_t>(rows * cols / 32));
      std::uniform_int_distribution<int> byte(0, 255), scale(117, 137);
      for (uint8_t& v : t.packed) v = uint8_t(byte(rng));
      for (uint8_t& v : t.scales) v = uint8_t(scale(rng));
      t.w.data = t.packed.data();
      t.w.scales = t.scales.data();
      break;
    }
    case WeightType::FP8_E4M3: {
      // Every finite e4m3 byte (0x7f and 0xff are NaN), block scales like DeepSeek-V3's (~1e-3..1e-2).
      t.packed.resize(static_cast<size_t>(rows * cols));
      const int64_t rb = (rows + kFp8Block - 1) / kFp8Block, cb = (cols + kFp8Block - 1) / kFp8Block;
      t.block_scales.resize(static_cast<size_t>(rb * cb));
      std::uniform_int_distribution<int> byte(0, 255);
      std::uniform_real_distribution<float> scale(1e-3f, 1e-2f);
      for (uint8_t& v : t.packed) {
        do v = uint8_t(byte(rng));
        while ((v & 0x7f) == 0x7f);
      }
      for (float& v : t.block_scales) v = scale(rng);
      t.w.data = t.packed.data();
      t.w.scales = t.block_scales.data();
      break;
    }
    case WeightType::INT4_G32: {
      // Random codes; positive scales like Kimi-K2-Thinking's (the products round at every
      // magnitude), a few negative ones to show the sign is not assumed.
      t.words.resize(static_cast<size_t>(rows * cols / 8));
      t.group_scales.resize(static_cast<size_t>(rows * cols / 32));
      std::uniform_int_distribution<uint32_t> word;
      std::uniform_real_distribution<float> mag(0.5f, 2.0f);
      for (uint32_t& v : t.words) v = word(rng);
      for (size_t i = 0; i < t.group_scales.size(); ++i)
        t.group_scales[i] = f32_to_bf16((i % 7 == 3 ? -1.0f : 1.0f) * std::ldexp(mag(rng), -6));
      t.w.data = t.words.data();
      t.w.scales = t.group_scales.data();
      break;
    }
  }
  return t;
}

std::vector<float> random_vectors(int64_t count, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = normal(rng);
  return x;
}

// Exact value of W[r, c] (all three formats widen exactly to fp32, hence to double).
double weight_at(const Weight& w, int64_t r, int64_t c) {
  switch (w.type) {
    case WeightType::F32: return static_cast<const float*>(w.data)[r * w.cols + c];
    case WeightType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w.data)[r * w.cols + c]);
    case WeightType::MXFP4: {
      uint8_t byte = static_cast<const uint8_t*>(w.data)[(r * w.cols + c) / 2];
      uint8_t code = c % 2 == 0 ? byte & 15 : byte >> 4;
      const uint8_t* scales = static_cast<const uint8_t*>(w.scales);
      return double(kE2M1Values[code]) * std::ldexp(1.0, int(scales[r * (w.cols / 32) + c / 32]) - 127);
    }
    case WeightType::FP8_E4M3: {
      const uint8_t b = static_cast<const uint8_t*>(w.data)[r * w.cols + c];
      const int64_t cb = (w.cols + kFp8Block - 1) / kFp8Block;
      const float s = static_cast<const float*>(w.scales)[(r / kFp8Block) * cb + c / kFp8Block];
      // e4m3 from its definition: sign, exponent bias 7, 3 mantissa bits, subnormals below 2^-6.
      const int e = (b >> 3) & 15, m = b & 7;
      const double mag = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(double(8 + m), e - 10);
      return (b & 0x80 ? -mag : mag) * double(s);
    }
    case WeightType::INT4_G32: return int4_by_definition(w, r, c);
  }
  return 0.0;
}

const char* type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "f32";
    case WeightType::BF16: return "bf16";
    case WeightType::MXFP4: return "mxfp4";
    case WeightType::FP8_E4M3: return "fp8";
    case WeightType::INT4_G32: return "int4";
  }
  return "?";
}

MatmulFn fn_of(const Isa& isa, WeightType t) {
  switch (t) {
    case WeightType::F32: return isa.matmul_f32;
    case WeightType::BF16: return isa.matmul_bf16;
    case WeightType::MXFP4: return isa.matmul_mxfp4;
    case WeightType::FP8_E4M3: return isa.matmul_fp8;
    case WeightType::INT4_G32: return isa.matmul_int4;
  }
  return nullptr;
}

// Two fp32 sums of the same `cols` products in different orders differ by at most about
// 2·cols·2^-24·Σ|w·x| (never less than 1e-5·Σ|w·x| is allowed). A decoding or indexing bug is
// off by O(Σ|w·x|), far above either.
double tolerance(const Weight& w, const float* x, int64_t r) {
  double abs_sum = 0.0;
  for (int64_t c = 0; c < w.cols; ++c) abs_sum += std::fabs(weight_at(w, r, c) * x[c]);
  return std::max(1e-5, 2.0 * double(w.cols) * std::ldexp(1.0, -24)) * abs_sum + 1e-30;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Every SIMD kernel set: the CPU's ISAs and, on a CPU with AVX-512 VBMI, the AVX-512 set without
// the VBMI kernels too.
std::vector<const Isa*> simd_isas() {
  std::vector<const Isa*> out;
  for (const Isa* isa : isa_variants())
    if (isa != &scalar_isa()) out.push_back(isa);
  return out;
}

// Compares one SIMD ISA against scalar for one shape (at most five failures reported).
void expect_matches_scalar(const Isa& isa, WeightType type, int64_t rows, int64_t cols, int64_t n,
                           std::mt19937_64& rng) {
  SCOPED_TRACE(cat("isa=", isa.name, " type=", type_name(type), " rows=", rows, " cols=", cols, " n=", n,
                   " seed=", test_seed()));
  TestWeight t = random_weight(type, rows, cols, rng);
  std::vector<float> x = random_vectors(n * cols, rng);
  std::vector<float> want(static_cast<size_t>(n * rows)), got(static_cast<size_t>(n * rows));
  linear_on(scalar_isa(), t.w, x.data(), n, want.data());
  linear_on(isa, t.w, x.data(), n, got.data());
  int failures = 0;
  for (int64_t i = 0; i < n && failures < 5; ++i) {
    for (int64_t r = 0; r < rows && failures < 5; ++r) {
      double tol = tolerance(t.w, x.data() + i * cols, r);
      float a = want[size_t(i * rows + r)], b = got[size_t(i * rows + r)];
      if (!(std::fabs(double(a) - double(b)) <= tol)) {
        ADD_FAILURE() << "row " << r << " vector " << i << ": scalar " << a << " vs " << b << " (tolerance " << tol
                      << ")";
        ++failures;
      }
    }
  }
}

TEST(KernelIsa, ScalarFirstAndSimdChosenByCpu) {
  std::vector<const Isa*> isas = available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_STREQ(isas.front()->name, "scalar");
  __builtin_cpu_init();
  // The strong definitions in matmul_avx2.cpp / matmul_avx512.cpp must be linked in and must
  // report exactly what the CPU supports.
  EXPECT_EQ(avx2_isa() != nullptr, bool(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")));
  EXPECT_EQ(avx512_isa() != nullptr,
            bool(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")));
  if (const Isa* a = avx2_isa()) {
    EXPECT_STREQ(a->name, "avx2");
  }
  if (const Isa* a = avx512_isa()) {
    EXPECT_STREQ(a->name, "avx512");
  }
  for (const Isa* isa : isas) {
    EXPECT_NE(isa->matmul_f32, nullptr);
    EXPECT_NE(isa->matmul_bf16, nullptr);
    EXPECT_NE(isa->matmul_mxfp4, nullptr);
    EXPECT_NE(isa->matmul_fp8, nullptr);
    EXPECT_NE(isa->matmul_int4, nullptr);
  }
}

TEST(KernelIsa, SetActiveIsaByName) {
  const Isa& before = active_isa();
  for (const Isa* isa : available_isas()) {
    set_active_isa(isa->name);
    EXPECT_EQ(&active_isa(), isa);
  }
  EXPECT_THROW(set_active_isa("sse9"), Error);
  set_active_isa(before.name);
}

// Sizes around the vector widths (8 and 16 lanes) and the row and vector tiles.
TEST(KernelMatmul, DenseMatchesScalarOnOddSizes) {
  std::mt19937_64 rng(test_seed());
  const int64_t cols_list[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 47, 100, 257, 1000};
  const int64_t rows_list[] = {1, 2, 3, 4, 5, 7, 9, 13};
  const int64_t n_list[] = {1, 2, 3, 4, 5, 7, 9};
  for (const Isa* isa : simd_isas()) {
    for (WeightType type : {WeightType::F32, WeightType::BF16}) {
      for (int64_t cols : cols_list) {
        std::uniform_int_distribution<size_t> pick_rows(0, std::size(rows_list) - 1), pick_n(0, std::size(n_list) - 1);
        for (int rep = 0; rep < 3; ++rep)
          expect_matches_scalar(*isa, type, rows_list[pick_rows(rng)], cols, n_list[pick_n(rng)], rng);
      }
    }
  }
}

// Every SIMD ISA against scalar for `type` at each of `cols_list`, three times with row and vector
// counts drawn around the tiles.
void expect_odd_sizes_match_scalar(WeightType type, std::span<const int64_t> cols_list, std::mt19937_64& rng) {
  const int64_t rows_list[] = {1, 2, 3, 4, 5, 7, 9, 13};
  const int64_t n_list[] = {1, 2, 3, 4, 5, 7, 9};
  for (const Isa* isa : simd_isas()) {
    for (int64_t cols : cols_list) {
      std::uniform_int_distribution<size_t> pick_rows(0, std::size(rows_list) - 1), pick_n(0, std::size(n_list) - 1);
      for (int rep = 0; rep < 3; ++rep)
        expect_matches_scalar(*isa, type, rows_list[pick_rows(rng)], cols, n_list[pick_n(rng)], rng);
    }
  }
}

TEST(KernelMatmul, Mxfp4MatchesScalarOnOddSizes) {
  std::mt19937_64 rng(test_seed() + 1);
  const int64_t cols_list[] = {32, 64, 96, 160, 480, 512, 544, 1056};
  expect_odd_sizes_match_scalar(WeightType::MXFP4, cols_list, rng);
}

// FP8 with 128x128 block scales, partial edge blocks included (DeepSeek-V3's kv_a_proj_with_mqa
// has 576 rows): every ISA within the sum-order bound of the exact dequantize-then-multiply product.
TEST(KernelMatmul, Fp8MatchesTheDequantizedProduct) {
  std::mt19937_64 rng(test_seed() + 3);
  const int64_t shapes[][2] = {{1, 1}, {3, 127}, {7, 128}, {130, 129}, {200, 300}, {576, 260}};
  for (const Isa* isa : isa_variants()) {
    for (const auto& sh : shapes) {
      const int64_t rows = sh[0], cols = sh[1], n = 3;
      SCOPED_TRACE(cat("isa=", isa->name, " rows=", rows, " cols=", cols, " seed=", test_seed()));
      TestWeight t = random_weight(WeightType::FP8_E4M3, rows, cols, rng);
      std::vector<float> x = random_vectors(n * cols, rng), y(static_cast<size_t>(n * rows));
      linear_on(*isa, t.w, x.data(), n, y.data());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r) {
          double want = 0;
          for (int64_t c = 0; c < cols; ++c) want += weight_at(t.w, r, c) * x[size_t(i * cols + c)];
          const double got = y[size_t(i * rows + r)];
          ASSERT_LE(std::fabs(got - want), tolerance(t.w, x.data() + i * cols, r)) << "row " << r << " vector " << i;
        }
    }
  }
}

// INT4_G32 (Kimi-K2-Thinking's routed experts): every SIMD ISA against scalar at sizes of one to
// 33 groups, odd row and vector counts around the tiles.
TEST(KernelMatmul, Int4MatchesScalarOnOddSizes) {
  std::mt19937_64 rng(test_seed() + 11);
  const int64_t cols_list[] = {32, 64, 96, 160, 480, 544, 1056};
  expect_odd_sizes_match_scalar(WeightType::INT4_G32, cols_list, rng);
}

// Every ISA, scalar included, within the sum-order bound of the dequantize-then-multiply product
// written here from the format's definition (int4_by_definition), at Kimi-K2's expert shapes too
// (gate/up [2048, 7168], down [7168, 2048]: 224 and 64 groups per row).
TEST(KernelMatmul, Int4MatchesTheDequantizedProduct) {
  std::mt19937_64 rng(test_seed() + 12);
  const int64_t shapes[][3] = {{1, 32, 1}, {5, 96, 3}, {13, 544, 4}, {64, 7168, 1}, {96, 2048, 2}};
  for (const Isa* isa : isa_variants()) {
    for (const auto& sh : shapes) {
      const int64_t rows = sh[0], cols = sh[1], n = sh[2];
      SCOPED_TRACE(cat("isa=", isa->name, " rows=", rows, " cols=", cols, " seed=", test_seed()));
      TestWeight t = random_weight(WeightType::INT4_G32, rows, cols, rng);
      std::vector<float> x = random_vectors(n * cols, rng), y(static_cast<size_t>(n * rows));
      linear_on(*isa, t.w, x.data(), n, y.data());
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r) {
          double want = 0;
          for (int64_t c = 0; c < cols; ++c) want += int4_by_definition(t.w, r, c) * x[size_t(i * cols + c)];
          const double got = y[size_t(i * rows + r)];
          ASSERT_LE(std::fabs(got - want), tolerance(t.w, x.data() + i * cols, r)) << "row " << r << " vector " << i;
        }
    }
  }
}

TEST(KernelInt4, GroupValuesAreRoundedProducts) {
  // s = 1.0000011b: 3·s = 11.0001001b has 9 significant bits where BF16 keeps 8, a tie that rounds
  // to even (11.000100b), so the table's 3·s is not 3·s.
  const uint16_t s = f32_to_bf16(1.0f + 1.0f / 64 + 1.0f / 128);
  float v[16];
  int4_group_values(s, v);
  for (int code = 0; code < 16; ++code)
    EXPECT_EQ(double(v[code]), bf16_by_definition(double(code - 8) * double(bf16_to_f32(s)))) << "code " << code;
  EXPECT_NE(double(v[8 + 3]), 3.0 * double(bf16_to_f32(s)));
  // Every finite BF16 scale: each entry is the rounded product.
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t sb = uint16_t(b);
    if (!std::isfinite(bf16_to_f32(sb))) continue;
    int4_group_values(sb, v);
    for (int code = 0; code < 16; ++code)
      ASSERT_EQ(double(v[code]), bf16_by_definition(double(code - 8) * double(bf16_to_f32(sb))))
          << "scale bits " << b << " code " << code;
  }
}

// Every code at every column position of two groups, under scales whose products round, overflow
// or fall below the normal range, read back through one-hot activations so each output is a single
// exact product whatever the summation order: every ISA must give exactly bf16(q·s) · x.
TEST(KernelInt4, AllCodesAllPositionsExtremeScalesExact) {
  const int64_t cols = 64, groups = 2;
  // Ordinary, negative, huge, subnormal, tiny and overflowing scales, and both sides of each end of
  // the exponent range the VBMI kernel multiplies out (fields 7 | 8 and 250 | 251).
  const float scales_f[] = {1.0f + 3.0f / 128, -0.0068359375f, 0x1.fep+125f, 0x1p-130f, 0x1.5p-120f, 3e38f,
                            0x1.7p-120f, -0x1.7p-119f, 0x1.9ap+123f, -0x1.9ap+124f};
  const int64_t rows = 16 * int64_t(std::size(scales_f));
  std::vector<uint32_t> words(static_cast<size_t>(rows * cols / 8), 0);
  std::vector<uint16_t> scales(static_cast<size_t>(rows * groups));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      words[size_t((r * cols + c) / 8)] |= uint32_t((r + 3 * c) % 16) << (4 * (c % 8));
    for (int64_t g = 0; g < groups; ++g) scales[size_t(r * groups + g)] = f32_to_bf16(scales_f[r / 16]);
  }
  Weight w{WeightType::INT4_G32, rows, cols, words.data(), scales.data()};
  std::vector<float> x(static_cast<size_t>(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i) x[size_t(i * cols + i)] = 1.0f;
  for (const Isa* isa : isa_variants()) {
    std::vector<float> y(static_cast<size_t>(cols * rows));
    linear_on(*isa, w, x.data(), cols, y.data());
    for (int64_t r = 0; r < rows; ++r) {
      // A row with an infinite weight (the product overflowed BF16) gives NaN for every one-hot
      // vector: the infinity meets a zero of x in any order.
      bool overflows = false;
      for (int64_t c = 0; c < cols; ++c) overflows = overflows || std::isinf(int4_by_definition(w, r, c));
      for (int64_t i = 0; i < cols; ++i) {
        const double got = y[size_t(i * rows + r)];
        if (overflows) {
          EXPECT_TRUE(std::isnan(got)) << isa->name << " row " << r << " column " << i;
          continue;
        }
        ASSERT_EQ(got, int4_by_definition(w, r, i))
            << isa->name << " code " << (r + 3 * i) % 16 << " column " << i << " scale " << scales_f[r / 16];
      }
    }
  }
}

TEST(KernelFp8, DecodeIsE4M3) {
  EXPECT_EQ(e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);            // exponent 7, mantissa 0
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);          // the largest finite value
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    const int e = (b >> 3) & 15, m = b & 7;
    const double mag = e == 0 ? m / 8.0 * std::ldexp(1.0, -6) : (1 + m / 8.0) * std::ldexp(1.0, e - 7);
    EXPECT_EQ(double(e4m3_to_f32(uint8_t(b))), b & 0x80 ? -mag : mag) << "byte " << b;
  }
}

// Every byte in every lane position of a SIMD step, one block at a time: each ISA's product is the
// scalar one's within rounding, a NaN code (which no valid checkpoint holds) makes exactly the rows
// that hold it NaN on every ISA, and a row with subnormal codes only keeps its tiny values.
TEST(KernelFp8, EveryCodeAndNanRowsOnEveryIsa) {
  const int64_t rows = 9, cols = 300;  // 3 column blocks, the last partial; a partial row tile
  std::vector<uint8_t> q(size_t(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) q[size_t(i)] = uint8_t((i * 37 + 11) % 256 == 0x7f ? 0x7e : (i * 37 + 11) % 256);
  for (uint8_t& b : q)
    if (b == 0xff) b = 0xfe;
  q[size_t(2 * cols + 257)] = 0x7f;  // row 2, last block
  q[size_t(5 * cols + 3)] = 0xff;    // row 5, first block
  for (int64_t c = 0; c < cols; ++c) q[size_t(7 * cols + c)] = uint8_t(c % 8);  // row 7: zero and subnormals
  std::vector<float> scales(size_t(1 * 3));
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.003f * float(i + 1);
  Weight w{.type = WeightType::FP8_E4M3, .rows = rows, .cols = cols, .data = q.data(), .scales = scales.data()};
  std::vector<float> x(size_t(2 * cols));
  for (int64_t c = 0; c < 2 * cols; ++c) x[size_t(c)] = float((c * 13) % 17) / 8.0f - 1.0f;
  std::vector<float> want(size_t(2 * rows)), got(size_t(2 * rows));
  linear_on(scalar_isa(), w, x.data(), 2, want.data());
  for (const Isa* isa : isa_variants()) {
    linear_on(*isa, w, x.data(), 2, got.data());
    for (int64_t i = 0; i < 2 * rows; ++i) {
      const int64_t r = i % rows;
      if (r == 2 || r == 5) {
        EXPECT_TRUE(std::isnan(got[size_t(i)])) << isa->name << " row " << r;
        continue;
      }
      ASSERT_FALSE(std::isnan(want[size_t(i)]));
      EXPECT_NEAR(got[size_t(i)], want[size_t(i)], 1e-5 * (1 + std::fabs(want[size_t(i)]))) << isa->name << " row " << r;
    }
    EXPECT_NE(got[7], 0.0f) << isa->name << ": a row of subnormal codes lost its values";
  }
}

// fp8_has_nan_code finds 0x7f and 0xff at every position (word-wise body and byte tail) and
// nothing else.
TEST(KernelFp8, NanCodeScanFindsExactlyTheNanCodes) {
  std::vector<uint8_t> all;
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7f) != 0x7f) all.push_back(uint8_t(b));
  EXPECT_FALSE(fp8_has_nan_code(all.data(), all.size()));
  for (uint8_t nan : {uint8_t(0x7f), uint8_t(0xff)})
    for (size_t len : {size_t(1), size_t(7), size_t(8), size_t(21)})
      for (size_t at = 0; at < len; ++at) {
        std::vector<uint8_t> v(len, 0x7e);
        v[at] = nan;
        EXPECT_TRUE(fp8_has_nan_code(v.data(), len)) << "code " << int(nan) << " at " << at << " of " << len;
        EXPECT_FALSE(fp8_has_nan_code(v.data(), at)) << "before " << at;
      }
}

// A weight marked fp8_finite (checked once by its loader) skips the kernels' NaN scan and gives the
// same bits as the unmarked weight on every ISA, one vector and several, partial blocks included.
TEST(KernelFp8, CheckedWeightsGiveTheUncheckedBits) {
  std::mt19937_64 rng(test_seed() + 21);
  const int64_t shapes[][2] = {{9, 300}, {576, 260}, {130, 1024}};
  for (const Isa* isa : isa_variants()) {
    for (const auto& sh : shapes) {
      TestWeight t = random_weight(WeightType::FP8_E4M3, sh[0], sh[1], rng);
      ASSERT_FALSE(fp8_has_nan_code(static_cast<const uint8_t*>(t.w.data), size_t(sh[0] * sh[1])));
      Weight checked = t.w;
      checked.fp8_finite = true;
      for (int64_t n : {1, 2, 3}) {
        std::vector<float> x = random_vectors(n * sh[1], rng), a(size_t(n * sh[0])), b(a.size());
        linear_on(*isa, t.w, x.data(), n, a.data());
        linear_on(*isa, checked, x.data(), n, b.data());
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
            << isa->name << " rows " << sh[0] << " cols " << sh[1] << " n " << n;
      }
    }
  }
}

// No kernel hands a floating-point unit a subnormal operand or relies on MXCSR's modes: with
// denormals-are-zero and flush-to-zero set, every product gives the bits it gives without them.
// (Intel cores take a microcode assist, some hundred cycles, for each subnormal operand: decoding
// an FP8 subnormal code into an fp32 subnormal made DeepSeek-V3's products many times slower there
// (docs/BENCHMARKS.md, "Design measurements behind code comments"), and under DAZ that decode reads
// those codes as zero, which this test would catch.) Random FP8 bytes
// hold every subnormal code; the other formats' random weights are normal numbers.
TEST(KernelMatmul, NoSubnormalOperandsOnAnyPath) {
  std::mt19937_64 rng(test_seed() + 31);
  const unsigned saved = _mm_getcsr();
  for (const Isa* isa : isa_variants()) {
    for (WeightType type :
         {WeightType::F32, WeightType::BF16, WeightType::MXFP4, WeightType::FP8_E4M3, WeightType::INT4_G32}) {
      TestWeight t = random_weight(type, 37, 320, rng);
      for (int64_t n : {1, 3}) {
        std::vector<float> x = random_vectors(n * 320, rng), plain(size_t(n * 37)), flushed(plain.size());
        linear_on(*isa, t.w, x.data(), n, plain.data());
        _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ
        linear_on(*isa, t.w, x.data(), n, flushed.data());
        _mm_setcsr(saved);
        EXPECT_EQ(std::memcmp(plain.data(), flushed.data(), plain.size() * 4), 0)
            << isa->name << " " << type_name(type) << " n " << n;
      }
    }
    TestWeight t = random_weight(WeightType::FP8_E4M3, 3, 300, rng);
    std::vector<float> plain(300), flushed(300);
    isa->widen_fp8(t.w, 1, plain.data());
    _mm_setcsr(saved | 0x8040u);
    isa->widen_fp8(t.w, 1, flushed.data());
    _mm_setcsr(saved);
    EXPECT_EQ(std::memcmp(plain.data(), flushed.data(), plain.size() * 4), 0) << isa->name << " widen_fp8";
  }
}

// Every ISA's FP8 row widening gives fp8_widen_row's bits (each value times its block's scale,
// rounded once), partial chunks and blocks included, NaN codes as NaN.
TEST(KernelFp8, WideningGivesTheTableBits) {
  std::mt19937_64 rng(test_seed() + 32);
  for (const Isa* isa : isa_variants()) {
    for (int64_t cols : {1, 15, 63, 64, 65, 130, 300, 576}) {
      TestWeight t = random_weight(WeightType::FP8_E4M3, 130, cols, rng);
      t.packed[size_t(129 * cols + cols / 2)] = 0xff;
      for (int64_t r : {0, 127, 128, 129}) {
        std::vector<float> want(static_cast<size_t>(cols)), got(static_cast<size_t>(cols), 7.0f);
        fp8_widen_row(t.w, r, want.data());
        isa->widen_fp8(t.w, r, got.data());
        for (int64_t c = 0; c < cols; ++c) {
          if (std::isnan(want[size_t(c)])) {
            EXPECT_TRUE(std::isnan(got[size_t(c)])) << isa->name << " cols " << cols << " row " << r << " col " << c;
            continue;
          }
          ASSERT_TRUE(same_bits(want[size_t(c)], got[size_t(c)]))
              << isa->name << " cols " << cols << " row " << r << " col " << c << ": " << want[size_t(c)] << " vs "
              << got[size_t(c)];
        }
      }
    }
  }
}

// The K3 routed-expert shapes themselves (gate/up [3072, 3584], down [3584, 3072]).
TEST(KernelMatmul, MatchesScalarOnK3ExpertShapes) {
  std::mt19937_64 rng(test_seed() + 2);
  for (const Isa* isa : simd_isas()) {
    for (WeightType type : {WeightType::MXFP4, WeightType::BF16}) {
      expect_matches_scalar(*isa, type, 3072, 3584, 2, rng);
      expect_matches_scalar(*isa, type, 3584, 3072, 1, rng);
    }
  }
}

// Rows whose scales reach 253 or 254 (where an E2M1 value times the scale overflows fp32) and
// rows with scale bytes 1 and 2 (subnormal scaled weights) sit next to ordinary rows in one tile;
// all must agree with scalar, and none may change its neighbours' results.
TEST(KernelMatmul, Mxfp4ExtremeScaleRowsMatchScalar) {
  std::mt19937_64 rng(test_seed() + 3);
  const int64_t rows = 13, cols = 192, blocks = cols / 32, n = 6;
  for (const Isa* isa : isa_variants()) {
    SCOPED_TRACE(cat("isa=", isa->name, " seed=", test_seed()));
    TestWeight t = random_weight(WeightType::MXFP4, rows, cols, rng);
    t.scales[2 * blocks + 1] = 254;
    t.scales[5 * blocks + 0] = 253;
    t.scales[6 * blocks + 5] = 254;
    for (int64_t b = 0; b < blocks; ++b) t.scales[9 * blocks + b] = uint8_t(1 + b % 2);
    t.scales[11 * blocks + 3] = 1;
    // Small activations exercise the huge scales, large ones the tiny scales; outputs whose exact
    // value overflows are skipped.
    for (int x_exp : {-100, 100}) {
      std::vector<float> x = random_vectors(n * cols, rng);
      for (float& v : x) v = std::ldexp(v, x_exp);
      std::vector<float> want(static_cast<size_t>(n * rows)), got(static_cast<size_t>(n * rows));
      linear_on(scalar_isa(), t.w, x.data(), n, want.data());
      linear_on(*isa, t.w, x.data(), n, got.data());
      int checked = 0;
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < rows; ++r) {
          const double tol = tolerance(t.w, x.data() + i * cols, r);
          if (!std::isfinite(want[size_t(i * rows + r)]) || tol > 1e38) continue;
          ++checked;
          float a = want[size_t(i * rows + r)], b = got[size_t(i * rows + r)];
          EXPECT_LE(std::fabs(double(a) - double(b)), tol) << "row " << r << " vector " << i << " x 2^" << x_exp;
        }
      }
      EXPECT_GE(checked, n * (rows - 3)) << "x 2^" << x_exp;
      // Invariance of every row under batching, across the path boundary.
      for (int64_t i = 0; i < n; ++i) {
        std::vector<float> one(static_cast<size_t>(rows));
        linear_on(*isa, t.w, x.data() + i * cols, 1, one.data());
        for (int64_t r = 0; r < rows; ++r)
          EXPECT_TRUE(same_bits(one[size_t(r)], got[size_t(i * rows + r)])) << "row " << r << " vector " << i;
      }
    }
  }
}

// ---- batch invariance, bit for bit, on every ISA including scalar ----

void expect_batch_invariant(const Isa& isa, WeightType type, int64_t rows, int64_t cols, int64_t n,
                            std::mt19937_64& rng) {
  SCOPED_TRACE(cat("isa=", isa.name, " type=", type_name(type), " rows=", rows, " cols=", cols, " n=", n,
                   " seed=", test_seed()));
  TestWeight t = random_weight(type, rows, cols, rng);
  std::vector<float> x = random_vectors(n * cols, rng);
  std::vector<float> batched(static_cast<size_t>(n * rows));
  linear_on(isa, t.w, x.data(), n, batched.data());

  // Each vector alone, from its own buffer.
  for (int64_t i = 0; i < n; ++i) {
    std::vector<float> xi(x.begin() + i * cols, x.begin() + (i + 1) * cols), yi(static_cast<size_t>(rows));
    linear_on(isa, t.w, xi.data(), 1, yi.data());
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_TRUE(same_bits(yi[size_t(r)], batched[size_t(i * rows + r)]))
          << "n=1 vs batched: row " << r << " vector " << i;
  }

  // Random row splits, every piece with a different sub-batch offset, through the raw entry
  // point with strided x and y.
  MatmulFn fn = fn_of(isa, type);
  const int64_t ldx = cols + 5, ldy = rows + 3;
  std::vector<float> xs(static_cast<size_t>(n * ldx), 7.0f), ys(static_cast<size_t>(n * ldy), -1.0f);
  for (int64_t i = 0; i < n; ++i) std::copy(x.begin() + i * cols, x.begin() + (i + 1) * cols, xs.begin() + i * ldx);
  std::uniform_int_distribution<int64_t> cut(0, rows);
  int64_t a = cut(rng), b = cut(rng);
  if (a > b) std::swap(a, b);
  const int64_t bounds[] = {0, a, b, rows};
  for (int k = 0; k < 3; ++k) {
    // Within a piece, also split the batch in two calls.
    int64_t split = n / 2;
    fn(t.w, xs.data(), ldx, split, ys.data(), ldy, bounds[k], bounds[k + 1]);
    fn(t.w, xs.data() + split * ldx, ldx, n - split, ys.data() + split * ldy, ldy, bounds[k], bounds[k + 1]);
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < rows; ++r)
      ASSERT_TRUE(same_bits(ys[size_t(i * ldy + r)], batched[size_t(i * rows + r)]))
          << "row split [" << a << "," << b << "): row " << r << " vector " << i;
    for (int64_t r = rows; r < ldy; ++r) ASSERT_EQ(ys[size_t(i * ldy + r)], -1.0f) << "wrote past row range";
  }

  // The threaded entry point with this ISA active.
  const Isa& before = active_isa();
  set_active_isa(isa.name);
  std::vector<float> threaded(static_cast<size_t>(n * rows));
  linear(t.w, x.data(), n, threaded.data());
  set_active_isa(before.name);
  EXPECT_EQ(std::memcmp(threaded.data(), batched.data(), threaded.size() * sizeof(float)), 0) << "threaded linear";
}

TEST(KernelBatchInvariance, DenseBitExact) {
  std::mt19937_64 rng(test_seed() + 4);
  for (const Isa* isa : isa_variants()) {
    for (WeightType type : {WeightType::F32, WeightType::BF16}) {
      expect_batch_invariant(*isa, type, 37, 203, 9, rng);
      expect_batch_invariant(*isa, type, 300, 64, 5, rng);
      expect_batch_invariant(*isa, type, 6, 17, 13, rng);
      // Long passes: more vectors than one 256 KiB block of them (vector_block), tails included.
      expect_batch_invariant(*isa, type, 9, 1100, 261, rng);
    }
  }
}

TEST(KernelBatchInvariance, Int4BitExact) {
  std::mt19937_64 rng(test_seed() + 13);
  for (const Isa* isa : isa_variants()) {
    expect_batch_invariant(*isa, WeightType::INT4_G32, 37, 224, 9, rng);
    expect_batch_invariant(*isa, WeightType::INT4_G32, 300, 64, 5, rng);
    expect_batch_invariant(*isa, WeightType::INT4_G32, 6, 544, 13, rng);
  }
}

TEST(KernelBatchInvariance, Mxfp4BitExact) {
  std::mt19937_64 rng(test_seed() + 5);
  for (const Isa* isa : isa_variants()) {
    expect_batch_invariant(*isa, WeightType::MXFP4, 37, 224, 9, rng);
    expect_batch_invariant(*isa, WeightType::MXFP4, 300, 64, 5, rng);
    expect_batch_invariant(*isa, WeightType::MXFP4, 6, 544, 13, rng);
    // Long passes: rows decoded once for many vectors (AVX-512), over more than one 256 KiB block
    // of vectors, partial chunks and tails included.
    expect_batch_invariant(*isa, WeightType::MXFP4, 37, 544, 37, rng);
    expect_batch_invariant(*isa, WeightType::MXFP4, 9, 1120, 230, rng);
  }
}

// ---- exact MXFP4 decoding ----

// E2M1 by hand (OCP MX spec): sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0.
double e2m1_by_hand(int code) {
  const double magnitude[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (code & 8 ? -1.0 : 1.0) * magnitude[code & 7];
}

TEST(KernelMxfp4, DecodeTableIsE2M1) {
  for (int code = 0; code < 16; ++code) {
    EXPECT_EQ(double(kE2M1Values[code]), e2m1_by_hand(code)) << "code " << code;
    EXPECT_EQ(std::signbit(kE2M1Values[code]), code >= 8) << "code " << code;
  }
  for (int e = 1; e <= 254; ++e) EXPECT_EQ(double(e8m0_to_f32(uint8_t(e))), std::ldexp(1.0, e - 127)) << "scale " << e;
  EXPECT_FALSE(mxfp4_scale_valid(0));
  EXPECT_FALSE(mxfp4_scale_valid(255));
  EXPECT_TRUE(mxfp4_scale_valid(1));
  EXPECT_TRUE(mxfp4_scale_valid(254));
}

// Every code at every column position of two blocks (low nibble = even column), under extreme
// and ordinary scales, read back through one-hot activations so each output is a single exact
// product, whatever the summation order: every ISA must give exactly code · 2^(e-127) · x.
TEST(KernelMxfp4, AllCodesAllPositionsExtremeScalesExact) {
  const int64_t cols = 64, blocks = 2;
  const uint8_t scale_bytes[] = {1, 2, 127, 252, 253, 254};
  const int64_t rows = 16 * int64_t(std::size(scale_bytes));
  std::vector<uint8_t> packed(static_cast<size_t>(rows * cols / 2)), scales(static_cast<size_t>(rows * blocks));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      uint8_t code = uint8_t((r + c) % 16);
      uint8_t& byte = packed[size_t((r * cols + c) / 2)];
      byte = c % 2 == 0 ? uint8_t((byte & 0xf0) | code) : uint8_t((byte & 0x0f) | (code << 4));
    }
    for (int64_t b = 0; b < blocks; ++b) scales[size_t(r * blocks + b)] = scale_bytes[r / 16];
  }
  Weight w{WeightType::MXFP4, rows, cols, packed.data(), scales.data()};
  // x exponents keep every exact product a normal float: 2^-126·0.5·2^30 and 2^127·6·2^-30.
  for (int x_exp : {-30, 0, 30}) {
    const double xv = std::ldexp(1.0, x_exp);
    std::vector<float> x(static_cast<size_t>(cols * cols), 0.0f);
    for (int64_t i = 0; i < cols; ++i) x[size_t(i * cols + i)] = float(xv);
    for (const Isa* isa : isa_variants()) {
      std::vector<float> y(static_cast<size_t>(cols * rows));
      linear_on(*isa, w, x.data(), cols, y.data());
      for (int64_t i = 0; i < cols; ++i) {
        for (int64_t r = 0; r < rows; ++r) {
          const int e = scale_bytes[r / 16];
          const double exact = e2m1_by_hand(int((r + i) % 16)) * std::ldexp(1.0, e - 127) * xv;
          if (std::fabs(exact) > 3.0e38 || (exact != 0.0 && std::fabs(exact) < 1.0e-37)) continue;
          ASSERT_EQ(double(y[size_t(i * rows + r)]), exact)
              << isa->name << " code " << (r + i) % 16 << " column " << i << " scale byte " << e << " x 2^" << x_exp;
        }
      }
    }
  }
}

// A full-row sum with the largest scale: each block is 6·2^127·x with x small, so the scalar's
// scale-after-sum and the SIMD paths must all stay finite and exact (all terms equal powers of two).
TEST(KernelMxfp4, LargestScaleSumsStayFinite) {
  const int64_t rows = 5, cols = 128, blocks = cols / 32;
  // Every code 7 (= 6), every scale byte 254 (= 2^127).
  std::vector<uint8_t> packed(static_cast<size_t>(rows * cols / 2), 0x77);
  std::vector<uint8_t> scales(static_cast<size_t>(rows * blocks), 254);
  Weight w{WeightType::MXFP4, rows, cols, packed.data(), scales.data()};
  std::vector<float> x(static_cast<size_t>(cols), std::ldexp(1.0f, -40));
  for (const Isa* isa : isa_variants()) {
    std::vector<float> y(static_cast<size_t>(rows));
    linear_on(*isa, w, x.data(), 1, y.data());
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_EQ(double(y[size_t(r)]), 6.0 * 128 * std::ldexp(1.0, 127 - 40)) << isa->name;
  }
}

}  // namespace
}  // namespace sluice::device
