// Run-time choice of the kernel ISA and the threaded entry point `linear`.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "device/cpu/kernels.h"

namespace sluice::device {
namespace {

const Isa* initial_isa() {
  const char* env = std::getenv("SLUICE_ISA");
  if (env && *env) {
    for (const Isa* isa : isa_variants())
      if (std::string(isa->name) == env) return isa;
    fail("SLUICE_ISA=", env, " is not available on this CPU (choose scalar, avx2 or avx512)");
  }
  return available_isas().back();
}

int initial_fp8_hint() {
  const char* env = std::getenv("SLUICE_FP8_PREFETCH");
  if (env && *env) {
    const std::string v = env;
    if (v == "none") return kFp8PrefetchNone;
    if (v == "nta") return kFp8PrefetchNta;
    if (v == "t1") return kFp8PrefetchT1;
    fail("SLUICE_FP8_PREFETCH=", v, " is not a prefetch hint (choose none, nta or t1)");
  }
  // Chosen by measurement (kernels_bench, one core, n = 1, ratio to the read floor): on Zen 4 the
  // non-temporal hint (T1 swung with the host's load); on Intel Xeons with AMX (the GPU machine's
  // host and a 2-core VM of the same class) T1. There NTA lines go to L1 alone and are evicted
  // before the tile that needs them (one tile, 8 rows of the weight, later) reads them, so each
  // line is read twice. Figures in docs/BENCHMARKS.md, "Design measurements behind code comments".
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") ? kFp8PrefetchNta : kFp8PrefetchT1;
}

const Isa*& active_slot() {
  static const Isa* active = initial_isa();
  return active;
}

MatmulFn pick(const Isa& isa, WeightType t) {
  switch (t) {
    case WeightType::F32: return isa.matmul_f32;
    case WeightType::BF16: return isa.matmul_bf16;
    case WeightType::MXFP4: return isa.matmul_mxfp4;
    case WeightType::FP8_E4M3: return isa.matmul_fp8;
    case WeightType::INT4_G32: return isa.matmul_int4;
  }
  return isa.matmul_f32;
}

}  // namespace

int fp8_next_tile_hint() {
  static const int hint = initial_fp8_hint();
  return hint;
}

// avx2_isa() and avx512_isa() are defined in matmul_avx2.cpp and matmul_avx512.cpp (always
// compiled; each returns nullptr on a CPU without its features). No weak defaults: in a static
// library those would satisfy the linker and leave the SIMD objects out.

std::vector<const Isa*> available_isas() {
  std::vector<const Isa*> out{&scalar_isa()};
  if (const Isa* a = avx2_isa()) out.push_back(a);
  if (const Isa* a = avx512_isa()) out.push_back(a);
  return out;
}

std::vector<const Isa*> isa_variants() {
  std::vector<const Isa*> out = available_isas();
  if (const Isa* plain = avx512_plain_isa()) out.push_back(plain);
  return out;
}

const Isa& active_isa() { return *active_slot(); }

void set_active_isa(std::string_view name) {
  for (const Isa* isa : isa_variants()) {
    if (name == isa->name) {
      active_slot() = isa;
      return;
    }
  }
  fail("kernel ISA '", std::string(name), "' is not available on this CPU");
}

namespace {

// y[i, r] += bias[r] after the product (the same rounding as adding it to the accumulator last).
void add_bias(const Weight& w, int64_t n, float* y, int64_t ldy, int64_t r0, int64_t r1) {
  if (!w.bias) return;
  for (int64_t i = 0; i < n; ++i) {
    float* yi = y + i * ldy;
    if (w.bias_type == DType::BF16) {
      const uint16_t* b = static_cast<const uint16_t*>(w.bias);
      for (int64_t r = r0; r < r1; ++r) yi[r] += bf16_to_f32(b[r]);
    } else {
      const float* b = static_cast<const float*>(w.bias);
      for (int64_t r = r0; r < r1; ++r) yi[r] += b[r];
    }
  }
}

// fn over vectors [0, n) a block at a time: at most 256 KiB of them (a multiple of 4), so they stay
// in L2 while every row tile of [r0, r1) passes over them. Row tile by row tile over all of a
// 16k-row prefill, each tile read the whole of x again from memory. No output's arithmetic depends
// on the blocks (the kernels are batch invariant).
void in_vector_blocks(MatmulFn fn, const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy,
                      int64_t r0, int64_t r1) {
  constexpr int64_t kBlockBytes = 256 << 10, kTile = 4;
  const int64_t nb = std::max(kTile, kBlockBytes / std::max<int64_t>(w.cols * 4, 1) / kTile * kTile);
  for (int64_t i = 0; i < n; i += nb) fn(w, x + i * ldx, ldx, std::min(nb, n - i), y + i * ldy, ldy, r0, r1);
}

}  // namespace

void linear_on(const Isa& isa, const Weight& w, const float* x, int64_t n, float* y) {
  in_vector_blocks(pick(isa, w.type), w, x, w.cols, n, y, w.rows, 0, w.rows);
  add_bias(w, n, y, w.rows, 0, w.rows);
}

void linear(const Isa& isa, const Weight& w, const float* x, int64_t ldx, int64_t n, float* y, int64_t ldy) {
  MatmulFn fn = pick(isa, w.type);
  // Rows are split so each thread streams a contiguous slice of the weight.
  const int64_t grain = std::max<int64_t>(16, 4096 / std::max<int64_t>(1, w.cols / 64));
  ThreadPool& pool = ThreadPool::global();
  const int64_t threads = pool.size(), row_parts = std::min(threads, (w.rows + grain - 1) / grain);
  // A pass of many rows through a weight too small to give every thread a slice of it (a prefill
  // through the default model's 256-wide projections was one thread's work): the rows of x are
  // split as well. Every product's bits are its own row's and column's alone (the kernels are
  // batch invariant), so the split changes none.
  constexpr int64_t kMinPassRows = 16;
  const int64_t x_parts = row_parts >= threads ? 1 : std::min(threads / row_parts, n / kMinPassRows);
  if (x_parts <= 1) {
    pool.parallel_for(w.rows, grain, [&](int64_t r0, int64_t r1) {
      in_vector_blocks(fn, w, x, ldx, n, y, ldy, r0, r1);
      add_bias(w, n, y, ldy, r0, r1);
    });
    return;
  }
  pool.parallel_for(row_parts * x_parts, 1, [&](int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t rp = k % row_parts, xp = k / row_parts;
      const int64_t r0 = w.rows * rp / row_parts, r1 = w.rows * (rp + 1) / row_parts;
      const int64_t i0 = n * xp / x_parts, i1 = n * (xp + 1) / x_parts;
      in_vector_blocks(fn, w, x + i0 * ldx, ldx, i1 - i0, y + i0 * ldy, ldy, r0, r1);
      add_bias(w, i1 - i0, y + i0 * ldy, ldy, r0, r1);
    }
  });
}

void linear_batch(const Isa& isa, std::span<const LinearItem> items) {
  int64_t total = 0;
  for (const LinearItem& it : items) total += it.w->rows;
  ThreadPool::global().parallel_for(total, 64, [&](int64_t b, int64_t e) {
    int64_t start = 0;  // the first row of items[i] in the laid-out rows
    for (const LinearItem& it : items) {
      const int64_t r0 = std::max<int64_t>(b - start, 0), r1 = std::min<int64_t>(e - start, it.w->rows);
      if (r0 < r1) {
        in_vector_blocks(pick(isa, it.w->type), *it.w, it.x, it.ldx, it.n, it.y, it.ldy, r0, r1);
        add_bias(*it.w, it.n, it.y, it.ldy, r0, r1);
      }
      start += it.w->rows;
      if (start >= e) break;
    }
  });
}

void linear(const Weight& w, const float* x, int64_t n, float* y) { linear(active_isa(), w, x, w.cols, n, y, w.rows); }

}  // namespace sluice::device
