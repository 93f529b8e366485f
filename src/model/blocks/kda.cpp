// The KDA block: projections, the KDA op, the output projection.
#include "model/blocks/kda.h"

namespace sluice::model {

using device::Buf;
using device::BufType;
using device::LinearOut;

void KdaWeights::bind_op() {
  op.q_conv = q_conv.v;
  op.k_conv = k_conv.v;
  op.v_conv = v_conv.v;
  op.dt_bias = dt_bias.v;
  op.a_log = a_log.v;
  op.o_norm = o_norm.v;
}

void kda_forward(device::Device& d, const KdaWeights& w, const Buf& x, const device::KdaState& from,
                 device::KdaState& to, const device::KdaRecord* rec, Buf out, const std::atomic<bool>* cancel) {
  device::ScratchScope scope(d);
  const int64_t T = x.rows, P = w.op.dim(), dk = w.op.head_dim;
  device::KdaInputs in;
  in.q = d.scratch(BufType::F32, T, P);
  in.k = d.scratch(BufType::F32, T, P);
  in.v = d.scratch(BufType::F32, T, P);
  in.f = d.scratch(BufType::F32, T, P);
  in.beta = d.scratch(BufType::F32, T, w.op.heads);
  in.gate = d.scratch(BufType::F32, T, P);
  Buf fa = d.scratch(BufType::F32, T, dk);
  if (w.full_rank_gate) {
    const LinearOut outs[] = {{&w.q, in.q}, {&w.k, in.k}, {&w.v, in.v}, {&w.f_a, fa}, {&w.b, in.beta}, {&w.g, in.gate}};
    d.linear(x, outs);
  } else {
    Buf ga = d.scratch(BufType::F32, T, dk);
    const LinearOut outs[] = {{&w.q, in.q}, {&w.k, in.k}, {&w.v, in.v}, {&w.f_a, fa}, {&w.b, in.beta}, {&w.g_a, ga}};
    d.linear(x, outs);
    const LinearOut gb[] = {{&w.g_b, in.gate}};
    d.linear(ga, gb);
  }
  const LinearOut fb[] = {{&w.f_b, in.f}};
  d.linear(fa, fb);
  Buf o = d.scratch(BufType::F32, T, P);
  if (rec) {
    d.kda(w.op, in, from, to, rec, o);  // a verify pass (short) records every row in one call
  } else {
    // The recurrence carries its state from slice to slice (the first reads `from`), and a T-row
    // call is T one-row calls bit for bit, so the slices change nothing; see for_attention_slices.
    for_attention_slices(T, cancel, [&](int64_t r0, int64_t n) {
      const device::KdaInputs s{in.q.rows_view(r0, n), in.k.rows_view(r0, n), in.v.rows_view(r0, n),
                                 in.f.rows_view(r0, n), in.beta.rows_view(r0, n), in.gate.rows_view(r0, n)};
      d.kda(w.op, s, r0 == 0 ? from : to, to, nullptr, o.rows_view(r0, n));
    });
  }
  const LinearOut proj[] = {{&w.o, out}};
  d.linear(o, proj);
}

}  // namespace sluice::model
