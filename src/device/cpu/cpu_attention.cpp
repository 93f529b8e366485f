// Attention on the CPU: the MLA cache write and absorbed MLA over the compact cache (the target's
// MLA layers and the DSpark drafter), grouped-query attention over a KV cache (causal, optional
// sliding window and learned sinks), and rotary embeddings from a per-pass cos/sin table.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "device/cpu/cpu_device.h"
#include "device/mathf.h"
#include "device/cpu/lanes.h"
#include "device/cpu/weight_rows.h"

namespace sluice::device {
namespace {

using lanes::exp4;
using lanes::load4;
using lanes::splat4;
using lanes::store4;
using lanes::v4;

// Absorbed-MLA tiles are 16 query rows of one head: four v4 of lanes.
constexpr int64_t kTile = kAttnTile;

// Scores of two positions for a tile: a[r] = Σ_i qT[i][r]·x[i] and b[r] likewise with y, over i
// in order, against the tile's transposed queries qT [n][16] (two positions at once hide the
// sums' latency; every lane is still one dot summed left to right).
inline void tile_dots2(const float* qT, const float* x, const float* y, int64_t n, float* a, float* b) {
  v4 a0 = load4(a), a1 = load4(a + 4), a2 = load4(a + 8), a3 = load4(a + 12);
  v4 b0 = load4(b), b1 = load4(b + 4), b2 = load4(b + 8), b3 = load4(b + 12);
  for (int64_t i = 0; i < n; ++i) {
    const v4 xi = splat4(x[i]), yi = splat4(y[i]);
    const float* q = qT + i * kTile;
    const v4 q0 = load4(q), q1 = load4(q + 4), q2 = load4(q + 8), q3 = load4(q + 12);
    a0 += q0 * xi;
    a1 += q1 * xi;
    a2 += q2 * xi;
    a3 += q3 * xi;
    b0 += q0 * yi;
    b1 += q1 * yi;
    b2 += q2 * yi;
    b3 += q3 * yi;
  }
  store4(a, a0);
  store4(a + 4, a1);
  store4(a + 8, a2);
  store4(a + 12, a3);
  store4(b, b0);
  store4(b + 4, b1);
  store4(b + 8, b2);
  store4(b + 12, b3);
}

// ctx[j] += s[p·stride]·lat[p, j] for p = p0..p1-1 in order, every j of kvr: the accumulators
// stay in registers across the positions of the block.

// One query row (decode): the same sums as a tile's lane, but 8 independent sums side by side
// across positions (scores) or outputs (value expansion) instead of across rows, so that a single
// row does not pay for 16 lanes of which 15 are empty. Every sum still runs over i in order with
// each product rounded before it is added (this file is compiled without FMA): the bits are a
// tile lane's. score[p·stride] = (Σ_i qa[i]·lat[p, i] + Σ_i qpe[i]·kpe[p, i])·scale for p < n.
void row_scores(const float* qa, const float* qpe, const float* lat, const float* kpe, int64_t kvr, int64_t rope,
                int64_t n, float scale, float* score, int64_t stride) {
  constexpr int64_t J = 8;
  int64_t p = 0;
  for (; p + J <= n; p += J) {
    float a[J] = {}, b[J] = {};
    for (int64_t i = 0; i < kvr; ++i)
      for (int64_t k = 0; k < J; ++k) a[k] += qa[i] * lat[(p + k) * kvr + i];
    for (int64_t i = 0; i < rope; ++i)
      for (int64_t k = 0; k < J; ++k) b[k] += qpe[i] * kpe[(p + k) * rope + i];
    for (int64_t k = 0; k < J; ++k) score[(p + k) * stride] = (a[k] + b[k]) * scale;
  }
  for (; p < n; ++p) {
    float a = 0.0f, b = 0.0f;
    for (int64_t i = 0; i < kvr; ++i) a += qa[i] * lat[p * kvr + i];
    for (int64_t i = 0; i < rope; ++i) b += qpe[i] * kpe[p * rope + i];
    score[p * stride] = (a + b) * scale;
  }
}

// out[j] = Σ_i w[j, i]·ctx[i] over i in order for j < rows, 8 rows side by side.
template <typename T, typename Widen>
void row_expand(const T* w, int64_t ld, const float* ctx, int64_t cols, int64_t rows, Widen widen, float* out) {
  constexpr int64_t J = 8;
  int64_t j = 0;
  for (; j + J <= rows; j += J) {
    float acc[J] = {};
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t k = 0; k < J; ++k) acc[k] += widen(w[(j + k) * ld + i]) * ctx[i];
    for (int64_t k = 0; k < J; ++k) out[j + k] = acc[k];
  }
  for (; j < rows; ++j) {
    float acc = 0.0f;
    for (int64_t i = 0; i < cols; ++i) acc += widen(w[j * ld + i]) * ctx[i];
    out[j] = acc;
  }
}

// softmax over n scores plus one extra logit (a learned sink) whose probability is dropped.
void softmax_with_sink(float* x, int64_t n, float sink) {
  float m = sink;
  for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  float s = mathf::exp(sink - m);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = mathf::exp(x[i] - m);
    s += x[i];
  }
  float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace

void CpuDevice::mla_cache_write(const Buf& kv, const Vec& norm, float eps, Buf latent, Buf k_pe, int64_t first) {
  const int64_t kvr = latent.cols, rope = k_pe.cols, T = kv.rows;
  SLUICE_CHECK(kv.cols == kvr + rope && norm.n == kvr && first >= 0 && first + T <= latent.rows &&
                   first + T <= k_pe.rows,
               "mla_cache_write: shapes");
  row_slices(T, row_grain(kvr + rope), [&](int64_t, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* row = row_ptr(kv, t);
      device::rmsnorm(row, norm.p, kvr, eps, row_ptr(latent, first + t));
      std::copy(row + kvr, row + kvr + rope, row_ptr(k_pe, first + t));
    }
  });
}

// Absorbed MLA in tiles of kTile query rows of one head. Every row's arithmetic is the plain
// scalar loop's, in its order, with each product rounded before its sum (this file is compiled
// without FMA): the absorbed query qabs = Σ_i q[i]·kv_b[k_row0 + i, :] in i order; a score per
// visible position, (qabs·latent[p] + q_pe·k_pe[p])·scale, each dot summed left to right; the
// softmax; ctx = Σ_p s[p]·latent[p] in p order; out[j] = kv_b[v_row0 + j, :]·ctx left to right.
// What the tile changes is only which independent sums run side by side: the kTile rows' score
// dots are lanes of one vector loop over a latent row held in L1 (a row's dot never splits), and
// the context sums walk the cache in blocks that stay in cache across the tile's rows. A row's
// bits therefore depend only on its own visible length, never on T or on its neighbours.
namespace {

// Σ over the T rows of the positions each sees: visible0 + t (causal) or visible0, at most window (> 0).
uint64_t visible_positions(int64_t T, int64_t visible0, bool causal, int64_t window) {
  uint64_t sum = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n = visible0 + (causal ? t : 0);
    sum += uint64_t(window > 0 ? std::min(n, window) : n);
  }
  return sum;
}

}  // namespace

void CpuDevice::mla_attention(const MlaOp& s, const Buf& qb, const Buf& latent, const Buf& k_pe, int64_t visible0,
                              Buf outb) {
  const int64_t nh = s.heads, nope = s.nope, rope = s.rope, vd = s.v_dim, kvr = s.kv_rank, qk = nope + rope;
  const int64_t T = qb.rows;
  const Weight& kv_b = *s.kv_b;
  SLUICE_CHECK(qb.cols == nh * qk && qb.contiguous() && outb.rows == T && outb.cols == nh * vd && outb.contiguous() &&
                   latent.cols == kvr && latent.contiguous() && k_pe.cols == rope && k_pe.contiguous(),
               "mla_attention: shapes");
  SLUICE_CHECK(kv_b.type == WeightType::BF16 || kv_b.type == WeightType::F32 || kv_b.type == WeightType::FP8_E4M3,
               "mla_attention: kv_b must be BF16, F32 or FP8");
  const bool fp8 = kv_b.type == WeightType::FP8_E4M3;
  const int64_t n_max = visible0 + (s.causal ? T - 1 : 0);
  SLUICE_CHECK(n_max <= latent.rows && n_max <= k_pe.rows, "mla_attention: ", n_max, " positions past the cache");
  const float* q = row_ptr(qb, 0);
  const float* lat = row_ptr(latent, 0);
  const float* kpe = row_ptr(k_pe, 0);
  float* out = row_ptr(outb, 0);
  // Per head: the absorbed query (nope × kv_rank) and value expansion (kv_rank × v_dim) of each row,
  // and per visible position the score (kv_rank + rope) and the latent sum (kv_rank).
  flops_ += 2 * uint64_t(nh) *
            (uint64_t(T) * uint64_t(nope + vd) * uint64_t(kvr) +
             visible_positions(T, visible0, s.causal, 0) * uint64_t(2 * kvr + rope));
  const int64_t tiles = (T + kTile - 1) / kTile, items = nh * tiles;
  const int64_t slots = std::min<int64_t>(ThreadPool::global().size(), items);
  // Per slot: qabs and q_pe transposed [kvr + rope][kTile], one row of qabs, the scores
  // position-major [n_max][kTile], the contexts [kTile][kvr] and transposed [kvr][kTile], and
  // (FP8 kv_b) kRowsWide widened value rows [kRowsWide][kvr].
  constexpr int64_t kRowsWide = 8;
  const int64_t per = (kvr + rope) * kTile + kvr + kTile * n_max + 2 * kTile * kvr + (fp8 ? kRowsWide * kvr : 0);
  ScratchScope scope(*this);
  float* scratch = temp<float>(slots * per);
  // Context blocks of about 16 KB of latent rows, reused across the tile's rows.
  const int64_t block = std::max<int64_t>(8, 4096 / std::max<int64_t>(kvr, 1));
  const float scale = s.scale;
  const bool causal = s.causal;
  const ContextRowsFn context = isa().context_rows;
  const WidenFp8Fn widen_fp8 = isa().widen_fp8;
  const TileScoresFn scores = isa().tile_scores;
  const TileSoftmaxFn softmax_tile = isa().tile_softmax;
  ThreadPool::global().parallel_for(slots, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      float* qT = scratch + c * per;  // [kvr + rope][kTile]: qabs, then q_pe
      float* qrow = qT + (kvr + rope) * kTile;
      float* sT = qrow + kvr;         // [n_max][kTile]
      float* ctx = sT + kTile * n_max;  // [kTile][kvr]
      float* ctxT = ctx + kTile * kvr;  // [kvr][kTile]
      float* wide = ctxT + kvr * kTile;  // FP8: [kRowsWide][kvr]
      for (int64_t item = c; item < items; item += slots) {
        const int64_t h = item % nh, t0 = (item / nh) * kTile, R = std::min(kTile, T - t0);
        const int64_t k_row0 = h * (nope + vd), v_row0 = k_row0 + nope;
        int64_t n[kTile];
        for (int64_t r = 0; r < kTile; ++r) n[r] = visible0 + (causal ? t0 + std::min(r, R - 1) : 0);
        const int64_t n_hi = n[kTile - 1];
        // The tile's absorbed queries and rope queries, one column per row (absent rows: zeros).
        std::fill(qT, qT + (kvr + rope) * kTile, 0.0f);
        for (int64_t r = 0; r < R; ++r) {
          const float* qh = q + ((t0 + r) * nh + h) * qk;
          std::fill(qrow, qrow + kvr, 0.0f);
          for (int64_t i = 0; i < nope; ++i) {
            if (fp8) {
              widen_fp8(kv_b, k_row0 + i, wide);
              for (int64_t j = 0; j < kvr; ++j) qrow[j] += qh[i] * wide[j];
            } else {
              weight_axpy_row(qh[i], kv_b, k_row0 + i, qrow);
            }
          }
          for (int64_t i = 0; i < kvr; ++i) qT[i * kTile + r] = qrow[i];
          for (int64_t i = 0; i < rope; ++i) qT[(kvr + i) * kTile + r] = qh[nope + i];
        }
        if (R == 1) {
          // One row (decode): its scores in lane 0 of the tile's layout (the other lanes copy it,
          // so the tile softmax computes nothing undefined), its context, its value expansion.
          row_scores(qrow, q + (t0 * nh + h) * qk + nope, lat, kpe, kvr, rope, n_hi, scale, sT, kTile);
          for (int64_t p = 0; p < n_hi; ++p) std::fill(sT + p * kTile + 1, sT + (p + 1) * kTile, sT[p * kTile]);
          softmax_tile(sT, n);
          std::fill(ctx, ctx + kvr, 0.0f);
          for (int64_t p0 = 0; p0 < n_hi; p0 += block)
            context(ctx, kvr, sT, kTile, lat, kvr, p0, std::min(p0 + block, n_hi), 1);
          float* o = out + (t0 * nh + h) * vd;
          if (fp8) {
            // kRowsWide value rows widened at a time, then the F32 loops (row_expand's sums do not
            // depend on how its rows are grouped).
            for (int64_t j = 0; j < vd; j += kRowsWide) {
              const int64_t rows = std::min(kRowsWide, vd - j);
              for (int64_t k = 0; k < rows; ++k) widen_fp8(kv_b, v_row0 + j + k, wide + k * kvr);
              row_expand(wide, kvr, ctx, kvr, rows, [](float x) { return x; }, o + j);
            }
          } else if (kv_b.type == WeightType::BF16)
            row_expand(static_cast<const uint16_t*>(kv_b.data) + v_row0 * kv_b.cols, kv_b.cols, ctx, kvr, vd,
                       [](uint16_t x) { return bf16_to_f32(x); }, o);
          else
            row_expand(static_cast<const float*>(kv_b.data) + v_row0 * kv_b.cols, kv_b.cols, ctx, kvr, vd,
                       [](float x) { return x; }, o);
          continue;
        }
        // Scores: for each position, the tile's 16 dots side by side (lanes never mix); rows
        // that do not see a position get a score there that nothing reads.
        for (int64_t p = 0; p < n_hi; p += kTileScoresMax)
          scores(qT, lat + p * kvr, kvr, kpe + p * rope, rope, std::min(kTileScoresMax, n_hi - p), scale,
                 sT + p * kTile);
        softmax_tile(sT, n);
        // Contexts, in position order per row, a block of latent rows at a time.
        std::fill(ctx, ctx + kTile * kvr, 0.0f);
        for (int64_t p0 = 0; p0 < n_hi; p0 += block) {
          const int64_t p1 = std::min(p0 + block, n_hi);
          // Rows see a prefix of the positions, longer down the tile: the last ones see the whole
          // block and go together, the others (at the causal diagonal) alone.
          int64_t whole = R;
          while (whole > 0 && n[whole - 1] >= p1) --whole;
          for (int64_t r = 0; r < whole; ++r)
            if (p0 < n[r]) context(ctx + r * kvr, kvr, sT + r, kTile, lat, kvr, p0, std::min(p1, n[r]), 1);
          if (whole < R) context(ctx + whole * kvr, kvr, sT + whole, kTile, lat, kvr, p0, p1, R - whole);
        }
        // Value expansion: out[j] = kv_b[v_row0 + j, :]·ctx, the tile's rows as lanes.
        for (int64_t r = 0; r < kTile; ++r)
          for (int64_t i = 0; i < kvr; ++i) ctxT[i * kTile + r] = r < R ? ctx[r * kvr + i] : 0.0f;
        auto expand = [&](auto row_at, auto widen) {
          for (int64_t j = 0; j < vd; ++j) {
            const auto* wr = row_at(v_row0 + j);
            float acc[kTile] = {};
            for (int64_t i = 0; i < kvr; ++i) {
              const float wi = widen(wr[i]);
              const float* ci = ctxT + i * kTile;
              for (int64_t r = 0; r < kTile; ++r) acc[r] += wi * ci[r];
            }
            for (int64_t r = 0; r < R; ++r) out[((t0 + r) * nh + h) * vd + j] = acc[r];
          }
        };
        const int64_t ld = kv_b.cols;
        if (fp8)
          expand(
              [&](int64_t row) -> const float* {
                widen_fp8(kv_b, row, wide);
                return wide;
              },
              [](float x) { return x; });
        else if (kv_b.type == WeightType::BF16)
          expand([&](int64_t row) { return static_cast<const uint16_t*>(kv_b.data) + row * ld; },
                 [](uint16_t x) { return bf16_to_f32(x); });
        else
          expand([&](int64_t row) { return static_cast<const float*>(kv_b.data) + row * ld; }, [](float x) { return x; });
      }
    }
  });
}

void CpuDevice::gqa_attention(const GqaOp& op, const Buf& qb, const Buf& kb, const Buf& vb, int64_t visible0,
                              Buf outb) {
  const int64_t D = op.head_dim, nh = op.heads, nkv = op.kv_heads, T = qb.rows;
  SLUICE_CHECK(nkv > 0 && nh % nkv == 0, "gqa_attention: ", nh, " heads over ", nkv, " kv heads");
  const int64_t group = nh / nkv, qd = nh * D, kvd = nkv * D;
  SLUICE_CHECK(qb.cols == qd && qb.contiguous() && outb.rows == T && outb.cols == qd && outb.contiguous() &&
                   kb.cols == kvd && vb.cols == kvd && kb.contiguous() && vb.contiguous(),
               "gqa_attention: shapes");
  SLUICE_CHECK(op.sinks.empty() || op.sinks.n == nh, "gqa_attention: ", op.sinks.n, " sinks for ", nh, " heads");
  const int64_t ctx_max = visible0 + T - 1;
  SLUICE_CHECK(ctx_max <= kb.rows && ctx_max <= vb.rows, "gqa_attention: ", ctx_max, " positions past the cache");
  const float* q = row_ptr(qb, 0);
  const float* kc = row_ptr(kb, 0);
  const float* vc = row_ptr(vb, 0);
  float* attn = row_ptr(outb, 0);
  flops_ += 4 * uint64_t(nh) * uint64_t(D) * visible_positions(T, visible0, true, op.window);  // scores, values
  ScratchScope scope(*this);
  float* scores = temp<float>(nh * ctx_max);
  ThreadPool::global().parallel_for(nh, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      float* sc = scores + h * ctx_max;
      const int64_t kvh = h / group;
      for (int64_t t = 0; t < T; ++t) {
        const float* qh = q + t * qd + h * D;
        const int64_t n = visible0 + t;  // causal: row t sees positions 0..visible0-1+t
        const int64_t p0 = op.window > 0 ? std::max<int64_t>(0, n - op.window) : 0;
        for (int64_t p = p0; p < n; ++p) sc[p - p0] = dot(qh, kc + p * kvd + kvh * D, D) * op.scale;
        if (op.sinks.empty()) softmax(sc, n - p0);
        else softmax_with_sink(sc, n - p0, op.sinks.p[h]);
        float* ah = attn + t * qd + h * D;
        std::fill(ah, ah + D, 0.0f);
        for (int64_t p = p0; p < n; ++p) axpy(sc[p - p0], vc + p * kvd + kvh * D, ah, D);
      }
    }
  });
}

void CpuDevice::rope_table(const RopeSpec& spec, int64_t first, Buf table) {
  const int64_t half = int64_t(spec.inv_freq.size());
  SLUICE_CHECK(table.cols == 2 * half, "rope_table: ", table.cols, " columns for ", half, " frequencies");
  for (int64_t t = 0; t < table.rows; ++t) rope_table_row(spec, first + t, row_ptr(table, t));
}

void CpuDevice::rope(const Buf& table, RopePairs pairs, Buf x, int64_t heads, int64_t head_stride, int64_t offset,
                     int64_t dim) {
  const int64_t half = dim / 2;
  SLUICE_CHECK(table.rows == x.rows && table.cols == dim && dim % 2 == 0 &&
                   (heads - 1) * head_stride + offset + dim <= x.cols,
               "rope: shapes");
  for (int64_t t = 0; t < x.rows; ++t) {
    const float* ct = row_ptr(table, t);
    const float* st = ct + half;
    for (int64_t h = 0; h < heads; ++h) {
      float* p = row_ptr(x, t) + h * head_stride + offset;
      if (pairs == RopePairs::Half) {
        for (int64_t i = 0; i < half; ++i) {
          const float a = p[i], b = p[i + half];
          p[i] = a * ct[i] - b * st[i];
          p[i + half] = b * ct[i] + a * st[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = p[2 * i], x1 = p[2 * i + 1];
          p[2 * i] = x0 * ct[i] - x1 * st[i];
          p[2 * i + 1] = x1 * ct[i] + x0 * st[i];
        }
      }
    }
  }
}

// The 4-lane context sums of one row.
static void context_row_v4(float* ctx, const float* s, int64_t stride, const float* lat, int64_t kvr, int64_t p0, int64_t p1) {
  int64_t j = 0;
  for (; j + 32 <= kvr; j += 32) {
    v4 c[8];
    for (int k = 0; k < 8; ++k) c[k] = load4(ctx + j + 4 * k);
    for (int64_t p = p0; p < p1; ++p) {
      const v4 w = splat4(s[p * stride]);
      const float* l = lat + p * kvr + j;
      for (int k = 0; k < 8; ++k) c[k] += w * load4(l + 4 * k);
    }
    for (int k = 0; k < 8; ++k) store4(ctx + j + 4 * k, c[k]);
  }
  for (; j + 4 <= kvr; j += 4) {
    v4 c = load4(ctx + j);
    for (int64_t p = p0; p < p1; ++p) c += splat4(s[p * stride]) * load4(lat + p * kvr + j);
    store4(ctx + j, c);
  }
  for (; j < kvr; ++j) {
    float c = ctx[j];
    for (int64_t p = p0; p < p1; ++p) c += s[p * stride] * lat[p * kvr + j];
    ctx[j] = c;
  }
}

// ContextRowsFn on 4 lanes, for the ISAs without a wider version: row by row.
void context_rows_v4(float* ctx, int64_t ldc, const float* s, int64_t stride, const float* lat, int64_t kvr, int64_t p0,
                     int64_t p1, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) context_row_v4(ctx + r * ldc, s + r, stride, lat, kvr, p0, p1);
}

namespace {

// The tile's dot sums two positions at a time (tile_dots2); an odd last position is computed
// twice and kept once.
void tile_dots_v4(const float* qT, const float* x, int64_t ldx, int64_t count, int64_t n, float* out) {
  for (int64_t k = 0; k < count; k += 2) {
    float a[kTile] = {}, b[kTile] = {};
    const int64_t k2 = std::min(k + 1, count - 1);
    tile_dots2(qT, x + k * ldx, x + k2 * ldx, n, a, b);
    std::copy(a, a + kTile, out + k * kTile);
    if (k2 > k) std::copy(b, b + kTile, out + k2 * kTile);
  }
}

}  // namespace

void tile_scores_v4(const float* qT, const float* lat, int64_t kvr, const float* kpe, int64_t rope, int64_t count,
                    float scale, float* out) {
  float b[kTileScoresMax * kTile];
  tile_dots_v4(qT, lat, kvr, count, kvr, out);
  tile_dots_v4(qT + kvr * kTile, kpe, rope, count, rope, b);
  for (int64_t k = 0; k < count * kTile; ++k) out[k] = (out[k] + b[k]) * scale;
}

// ops.cpp's softmax of every row of a tile at once, over scores stored position-major
// (sT[p·16 + r]) with row r seeing n[r] positions, n[0] <= n[r]: the max, the exps and their sum
// in position order, the scaling; lanes run side by side over the positions all rows see, then
// each row alone over its own last ones.
void tile_softmax_v4(float* sT, const int64_t* n) {
  const int64_t lo = n[0];
  v4 m[4], sum[4];
  for (int g = 0; g < 4; ++g) m[g] = load4(sT + 4 * g);
  for (int64_t p = 1; p < lo; ++p)
    for (int g = 0; g < 4; ++g) {
      const v4 x = load4(sT + p * kTile + 4 * g);
      m[g] = x > m[g] ? x : m[g];
    }
  float mr[kTile], sr[kTile];
  for (int g = 0; g < 4; ++g) store4(mr + 4 * g, m[g]);
  for (int64_t r = 0; r < kTile; ++r)
    for (int64_t p = std::max<int64_t>(lo, 1); p < n[r]; ++p) {
      const float x = sT[p * kTile + r];
      mr[r] = x > mr[r] ? x : mr[r];
    }
  for (int g = 0; g < 4; ++g) {
    m[g] = load4(mr + 4 * g);
    sum[g] = splat4(0.0f);
  }
  for (int64_t p = 0; p < lo; ++p)
    for (int g = 0; g < 4; ++g) {
      float* at = sT + p * kTile + 4 * g;
      const v4 e = exp4(load4(at) - m[g]);
      store4(at, e);
      sum[g] += e;
    }
  for (int g = 0; g < 4; ++g) store4(sr + 4 * g, sum[g]);
  for (int64_t r = 0; r < kTile; ++r)
    for (int64_t p = lo; p < n[r]; ++p) {
      float& x = sT[p * kTile + r];
      x = mathf::exp(x - mr[r]);
      sr[r] += x;
    }
  float inv[kTile];
  for (int64_t r = 0; r < kTile; ++r) inv[r] = 1.0f / sr[r];
  for (int64_t p = 0; p < lo; ++p)
    for (int g = 0; g < 4; ++g) store4(sT + p * kTile + 4 * g, load4(sT + p * kTile + 4 * g) * load4(inv + 4 * g));
  for (int64_t r = 0; r < kTile; ++r)
    for (int64_t p = lo; p < n[r]; ++p) sT[p * kTile + r] *= inv[r];
}

}  // namespace sluice::device
