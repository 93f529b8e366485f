// Kimi Delta Attention on the CPU after its projections: short causal conv + SiLU, per-head
// l2norm, the channel-wise log-decay gate, β, the delta-rule recurrence run row by row (the exact
// form; a chunked form would have to match it bit for bit), the per-head RMSNorm with the sigmoid
// output gate, and the replay of recorded rows that commit_prefix uses.
#include <cmath>

#include "core/error.h"
#include "core/thread_pool.h"
#include "device/cpu/cpu_device.h"
#include "device/mathf.h"

namespace sluice::device {
namespace {


// Pushes T raw rows into a [C, K-1] conv window (no outputs).
void conv_window_push(float* state, const float* x, int64_t ldx, int64_t T, int64_t C, int64_t K) {
  const int64_t S = K - 1;
  if (S <= 0) return;
  for (int64_t c = 0; c < C; ++c) {
    float* st = state + c * S;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j + 1 < S; ++j) st[j] = st[j + 1];
      st[S - 1] = x[t * ldx + c];
    }
  }
}

void check_kda_state(const KdaOp& op, const KdaState& s) {
  const int64_t P = op.dim(), dk = op.head_dim;
  SLUICE_CHECK(s.conv.contiguous() && s.conv.size() == 3 * P * (op.conv_kernel - 1) && s.S.contiguous() &&
                   s.S.size() == op.heads * dk * dk,
               "kda: state buffers do not match the op's shape");
}

}  // namespace

void CpuDevice::kda(const KdaOp& op, const KdaInputs& in, const KdaState& from, KdaState& to, const KdaRecord* rec,
                    Buf out) {
  const int64_t P = op.dim(), dk = op.head_dim, heads = op.heads, K = op.conv_kernel, T = in.q.rows;
  const int64_t win = P * (K - 1);
  check_kda_state(op, from);
  check_kda_state(op, to);
  for (const Buf* b : {&in.q, &in.k, &in.v, &in.f, &in.gate, static_cast<const Buf*>(&out)})
    SLUICE_CHECK(b->rows == T && b->cols == P && b->contiguous(), "kda: a [", T, ", ", P, "] input or output is not");
  SLUICE_CHECK(in.beta.rows == T && in.beta.cols == heads && in.beta.contiguous(), "kda: beta shape");
  // delta_step per row and head: decay (dk·dk), k·S, the rank-1 update and q·S (2·dk·dk each).
  flops_ += 7 * uint64_t(T) * uint64_t(heads) * uint64_t(dk) * uint64_t(dk);
  ScratchScope scope(*this);
  const float *qh = row_ptr(in.q, 0), *kh = row_ptr(in.k, 0), *vh = row_ptr(in.v, 0);
  if (rec) {
    SLUICE_CHECK(rec->raw.rows >= T && rec->raw.cols == 3 * P, "kda: record too small");
    for (int64_t t = 0; t < T; ++t) {
      float* raw = row_ptr(rec->raw, t);
      std::copy(qh + t * P, qh + (t + 1) * P, raw);
      std::copy(kh + t * P, kh + (t + 1) * P, raw + P);
      std::copy(vh + t * P, vh + (t + 1) * P, raw + 2 * P);
    }
  }
  if (from.conv.p != to.conv.p) copy(to.conv, from.conv);
  float* conv = row_ptr(to.conv, 0);
  float* qc = temp<float>(T * P);
  float* kc = temp<float>(T * P);
  float* vc = temp<float>(T * P);
  float* g = temp<float>(T * P);
  float* beta = temp<float>(T * heads);
  // The conv taps transposed to [K][P] per part, so a row's taps run along its channels.
  const int64_t lag = K - 1;  // rows of the conv window
  float* taps = temp<float>(3 * K * P);
  const float* conv_w[3] = {op.q_conv.p, op.k_conv.p, op.v_conv.p};
  for (int part = 0; part < 3; ++part)
    for (int64_t c = 0; c < P; ++c)
      for (int64_t j = 0; j < K; ++j) taps[(part * K + j) * P + c] = conv_w[part][c * K + j];
  float* decay = temp<float>(P);  // e^{A_log} of each channel's head
  for (int64_t ch = 0; ch < P; ++ch) decay[ch] = mathf::exp(op.a_log.p[ch / dk]);
  const float q_scale = 1.0f / std::sqrt(float(dk));
  const float* f = row_ptr(in.f, 0);
  const float* beta_raw = row_ptr(in.beta, 0);
  const UnaryFn unary = isa().unary;
  const float* xs[3] = {qh, kh, vh};
  float* outs[3] = {qc, kc, vc};
  // Everything before the recurrence is a function of a row's own inputs (and, for the conv, the
  // K-1 rows before it or the window before the pass), so the rows are split over the pool; each
  // element's arithmetic is the row-at-a-time one: the conv sum from 0 over the taps in order, the
  // input's own tap last, then SiLU; the l2norms; r = f + dt_bias and the gate
  // lower_bound·σ(e^{A_log}·r) (or −e^{A_log}·softplus(r)); β = σ.
  ThreadPool::global().parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      for (int part = 0; part < 3; ++part) {
        const float* x = xs[part];
        const float* w = taps + part * K * P;
        const float* window = conv + part * win;  // [P][lag]: the lag rows before the pass
        float* o = outs[part] + t * P;
        std::fill(o, o + P, 0.0f);
        for (int64_t j = 0; j < lag; ++j) {
          const int64_t tau = t - lag + j;
          const float* wj = w + j * P;
          if (tau >= 0) {
            const float* xr = x + tau * P;
            for (int64_t c = 0; c < P; ++c) o[c] += wj[c] * xr[c];
          } else {
            for (int64_t c = 0; c < P; ++c) o[c] += wj[c] * window[c * lag + tau + lag];
          }
        }
        const float* ws = w + lag * P;
        const float* xt = x + t * P;
        for (int64_t c = 0; c < P; ++c) o[c] += ws[c] * xt[c];
        unary(Unary::Silu, o, o, P);
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* q = qc + t * P + h * dk;
        l2norm(q, dk, 1e-6f, q);
        for (int64_t i = 0; i < dk; ++i) q[i] *= q_scale;
        float* k = kc + t * P + h * dk;
        l2norm(k, dk, 1e-6f, k);
      }
      float* gt = g + t * P;
      const float* ft = f + t * P;
      if (op.lower_bound_gate) {
        for (int64_t ch = 0; ch < P; ++ch) gt[ch] = decay[ch] * (ft[ch] + op.dt_bias.p[ch]);
        unary(Unary::Sigmoid, gt, gt, P);
        for (int64_t ch = 0; ch < P; ++ch) gt[ch] = op.lower_bound * gt[ch];
      } else {
        for (int64_t ch = 0; ch < P; ++ch) gt[ch] = -decay[ch] * softplus(ft[ch] + op.dt_bias.p[ch]);
      }
      unary(Unary::Sigmoid, beta_raw + t * heads, beta + t * heads, heads);
    }
  });
  // The window after the pass: slot j holds the input at row T − lag + j (before the pass: its slot
  // T + j, which no lower slot's update has overwritten yet).
  if (T > 0)
    for (int part = 0; part < 3; ++part) {
      const float* x = xs[part];
      for (int64_t c = 0; c < P; ++c) {
        float* st = conv + part * win + c * lag;
        for (int64_t j = 0; j < lag; ++j) st[j] = T - lag + j >= 0 ? x[(T - lag + j) * P + c] : st[T + j];
      }
    }

  // The recurrence: heads are independent; rows run in order.
  const float* gate = row_ptr(in.gate, 0);
  float* o = row_ptr(out, 0);
  float* kv_mem = temp<float>(heads * dk);
  float* gates = temp<float>(heads * dk);  // σ(gate) of a row, per head
  const float* S_from = row_ptr(from.S, 0);
  float* S_to = row_ptr(to.S, 0);
  const DeltaStepFn step = isa().delta_step;
  ThreadPool::global().parallel_for(heads, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      float* S = S_to + h * dk * dk;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t off = t * P + h * dk;
        const float* S_in = t == 0 ? S_from + h * dk * dk : S;
        step(S_in, S, dk, dk, qc + off, kc + off, vc + off, g + off, beta[t * heads + h], kv_mem + h * dk,
                   o + off);
        float* oh = o + off;
        device::rmsnorm(oh, op.o_norm.p, dk, op.norm_eps, oh);
        float* sg = gates + h * dk;
        unary(Unary::Sigmoid, gate + off, sg, dk);
        for (int64_t j = 0; j < dk; ++j) oh[j] *= sg[j];
      }
    }
  });
  if (T == 0 && S_from != S_to) std::copy(S_from, S_from + heads * dk * dk, S_to);
  if (rec) {
    for (int64_t t = 0; t < T; ++t) {
      std::copy(kc + t * P, kc + (t + 1) * P, row_ptr(rec->k, t));
      std::copy(vc + t * P, vc + (t + 1) * P, row_ptr(rec->v, t));
      std::copy(g + t * P, g + (t + 1) * P, row_ptr(rec->g, t));
      std::copy(beta + t * heads, beta + (t + 1) * heads, row_ptr(rec->beta, t));
    }
  }
}

void CpuDevice::kda_replay(const KdaOp& op, KdaState& st, const KdaRecord& rec, int64_t n) {
  const int64_t P = op.dim(), dk = op.head_dim, heads = op.heads, K = op.conv_kernel;
  const int64_t win = P * (K - 1);
  check_kda_state(op, st);
  SLUICE_CHECK(n >= 0 && n <= rec.raw.rows, "kda_replay of ", n, " rows from a record of ", rec.raw.rows);
  float* conv = row_ptr(st.conv, 0);
  for (int part = 0; part < 3; ++part)
    conv_window_push(conv + part * win, row_ptr(rec.raw, 0) + part * P, rec.raw.ld, n, P, K);
  flops_ += 5 * uint64_t(n) * uint64_t(heads) * uint64_t(dk) * uint64_t(dk);  // delta_step without q·S
  ScratchScope scope(*this);
  float* kv_mem = temp<float>(heads * dk);
  float* S_all = row_ptr(st.S, 0);
  const DeltaStepFn step = isa().delta_step;
  ThreadPool::global().parallel_for(heads, 1, [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      float* S = S_all + h * dk * dk;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t off = h * dk;
        step(S, S, dk, dk, nullptr, row_ptr(rec.k, t) + off, row_ptr(rec.v, t) + off, row_ptr(rec.g, t) + off,
                   row_ptr(rec.beta, t)[h], kv_mem + h * dk, nullptr);
      }
    }
  });
}

// One delta-rule step for one head: S ← Diag(α)S_in; δ = β(v − Sᵀk); S ← S + k δᵀ; o = Sᵀq.
// S is [dk, dv] with rows indexed by key channel; S_in may be S (in place) or the state before the
// pass (a verify pass leaves it untouched). q may be null (replay needs no output).
void delta_step_generic(const float* S_in, float* S, int64_t dk, int64_t dv, const float* q, const float* k, const float* v,
                const float* g, float beta, float* kv_mem, float* o) {
  for (int64_t i = 0; i < dk; ++i) {
    float a = mathf::exp(g[i]);
    const float* in = S_in + i * dv;
    float* row = S + i * dv;
    for (int64_t j = 0; j < dv; ++j) row[j] = in[j] * a;
  }
  for (int64_t j = 0; j < dv; ++j) kv_mem[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    const float* row = S + i * dv;
    float ki = k[i];
    for (int64_t j = 0; j < dv; ++j) kv_mem[j] += row[j] * ki;
  }
  for (int64_t j = 0; j < dv; ++j) kv_mem[j] = (v[j] - kv_mem[j]) * beta;
  for (int64_t i = 0; i < dk; ++i) {
    float* row = S + i * dv;
    float ki = k[i];
    for (int64_t j = 0; j < dv; ++j) row[j] += ki * kv_mem[j];
  }
  if (!q) return;
  for (int64_t j = 0; j < dv; ++j) o[j] = 0.0f;
  for (int64_t i = 0; i < dk; ++i) {
    const float* row = S + i * dv;
    float qi = q[i];
    for (int64_t j = 0; j < dv; ++j) o[j] += row[j] * qi;
  }
}

}  // namespace sluice::device
