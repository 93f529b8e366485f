// The MoE block on the device interface: route, sync, union, experts in arrival order, combine.
#include "model/blocks/moe.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace sluice::model {

using device::Buf;
using device::BufType;
using device::LinearOut;
using Clock = std::chrono::steady_clock;

namespace {
// Seconds since `t`, and `t` moved to now.
double lap(Clock::time_point& t) {
  const Clock::time_point now = Clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}
}  // namespace

void MoeHost::reserve(int64_t experts, int64_t slots) {
  if (int64_t(route.capacity()) < slots) route.reserve(size_t(slots));
  if (int64_t(members.capacity()) < slots) members.reserve(size_t(slots));
  if (int64_t(uni.capacity()) < experts) uni.reserve(size_t(experts));
  if (int64_t(offsets.capacity()) < experts + 1) offsets.reserve(size_t(experts + 1));
  if (int64_t(votes.capacity()) < experts) votes.reserve(size_t(experts));
  if (int64_t(chosen.capacity()) < experts) chosen.reserve(size_t(experts));
  if (int64_t(best_rank.capacity()) < experts) best_rank.reserve(size_t(experts));
  if (int64_t(views.capacity()) < experts) views.reserve(size_t(experts));
  if (int64_t(view_members.capacity()) < experts) view_members.reserve(size_t(experts));
}

namespace {

// The union of the routed experts (ascending) and each one's members, grouped by a counting sort
// so that every list keeps ascending (row, slot) order.
void group_members(MoeHost& h, int64_t experts) {
  h.votes.assign(size_t(experts), 0);
  for (int32_t e : h.route) h.votes[size_t(e)] += 1;
  h.uni.clear();
  h.offsets.assign(1, 0);
  for (int32_t e = 0; e < int32_t(experts); ++e) {
    if (!h.votes[size_t(e)]) continue;
    h.uni.push_back(e);
    h.offsets.push_back(h.offsets.back() + h.votes[size_t(e)]);
  }
  // votes[e] becomes the next write position of expert e's members.
  for (size_t i = 0; i < h.uni.size(); ++i) h.votes[size_t(h.uni[i])] = int32_t(h.offsets[i]);
  h.members.resize(h.route.size());
  for (size_t m = 0; m < h.route.size(); ++m) h.members[size_t(h.votes[size_t(h.route[m])]++)] = int64_t(m);
}

// The router of the pass's rows from its logits; the route ids come back to the host (the layer's
// sync point: the host decides what to read), the weights stay on the device.
void route_rows(device::Device& d, const MoeSpec& s, const MoeWeights& w, const Buf& logits, Buf weights,
                MoeHost& host) {
  const int64_t T = logits.rows, k = s.router.top_k;
  Buf ids = d.scratch(BufType::I32, T, k);
  device::RouterOp router = s.router;
  router.correction_bias = w.correction_bias.v;
  d.route(router, logits, ids, weights);
  host.route.resize(size_t(T * k));
  d.download(ids, host.route.data());
}

// The experts a GPU host's plan computes on its cores: each member's row of z (on the host) is
// gathered, the CPU device runs the experts over them from the RAM their views point into (one row
// per member, top_k 1: the CPU kernels give a row the same bits however rows are batched), and
// each output row is moved to its member's row of yexp on the device. Rows of yexp belong to one
// member each, so these writes and the device's own experts' never meet; combine then sums every
// row's slots in route order on the device.
void host_experts(device::Device& d, const device::ExpertsOp& op, Buf yexp, MoeHost& h) {
  const int64_t R = yexp.cols;
  int64_t n = 0;
  for (const auto& m : h.host_members) n += int64_t(m.size());
  h.zc.resize(size_t(n * R));
  h.yc.resize(size_t(n * R));
  h.host_ids.resize(size_t(n));
  h.host_lists.clear();
  int64_t at = 0;
  for (const auto& members : h.host_members) {
    const int64_t first = at;
    for (int64_t m : members) {
      const float* row = h.z.data() + (m / op.top_k) * R;
      std::copy(row, row + R, h.zc.data() + at * R);
      h.host_ids[size_t(at)] = at;
      ++at;
    }
    h.host_lists.emplace_back(h.host_ids.data() + first, size_t(at - first));
  }
  const Buf zc{h.zc.data(), n, R, R, BufType::F32, device::Place::Host};
  const Buf yc{h.yc.data(), n, R, R, BufType::F32, device::Place::Host};
  device::cpu_device().experts(device::ExpertsOp{.act = op.act, .top_k = 1}, h.host_views, h.host_lists, zc, yc);
  at = 0;
  for (const auto& members : h.host_members)
    for (int64_t m : members) d.upload(yexp.rows_view(m, 1), h.yc.data() + (at++) * R);
}

}  // namespace

void moe_forward(device::Device& d, const MoeSpec& s, const MoeWeights& w, store::ExpertProvider& experts, int layer,
                 const Buf& x, Buf out, MoeHost& host, TargetCounters* counters) {
  device::ScratchScope scope(d);
  const int64_t T = x.rows, E = s.router.experts, k = s.router.top_k, R = s.expert_input;
  host.reserve(E, T * k);
  Buf logits = d.scratch(BufType::F32, T, E);
  Buf z = s.latent ? d.scratch(BufType::F32, T, R) : x;
  if (s.latent) {
    const LinearOut outs[] = {{&w.router, logits}, {&w.latent_down, z}};
    d.linear(x, outs);
  } else {
    const LinearOut outs[] = {{&w.router, logits}};
    d.linear(x, outs);
  }
  Buf weights = d.scratch(BufType::F32, T, k);
  Clock::time_point t = Clock::now();
  double route_s = 0, lease_s = 0, host_s = 0, release_s = 0;
  route_rows(d, s, w, logits, weights, host);
  route_s += lap(t);
  group_members(host, E);
  if (counters) {
    counters->expert_requests += int64_t(host.uni.size());
    counters->routed_slots += T * k;
  }

  // Experts are asked for in groups the provider can hold at once; every expert of the union is
  // requested exactly once per pass and run over all rows routed to it, in the order they land.
  const device::ExpertsOp op{.act = s.act, .top_k = k};
  Buf yexp = d.scratch(BufType::F32, T * k, R);
  const size_t group = std::max<size_t>(1, experts.max_batch());
  // z comes back to the host now, while the device is idle after the route: once the lease has
  // queued expert copies, a download can wait behind them on the link (measured: the host's
  // experts then started only after every copy had landed).
  const bool z_on_host = experts.pass_rows(T);
  if (z_on_host) {
    host.z.resize(size_t(z.rows * z.cols));
    d.download(z, host.z.data());
  }
  for (size_t g0 = 0; g0 < host.uni.size(); g0 += group) {
    const size_t gn = std::min(group, host.uni.size() - g0);
    experts.begin(layer, std::span<const int32_t>(host.uni.data() + g0, gn));
    device::ExpertView view;
    const bool grouped = d.groups_experts();
    host.views.clear();
    host.view_members.clear();
    host.host_views.clear();
    host.host_members.clear();
    for (int got; (got = experts.next_ready(&view)) >= 0;) {
      const size_t u = g0 + size_t(got);
      const std::span<const int64_t> rows(host.members.data() + host.offsets[u],
                                          size_t(host.offsets[u + 1] - host.offsets[u]));
      if (view.compute_on_host) {
        host.host_views.push_back(view);
        host.host_members.push_back(rows);
      } else if (grouped) {
        host.views.push_back(view);
        host.view_members.push_back(rows);
      } else {
        d.wait(view.ready);
        d.experts(op, std::span<const device::ExpertView>(&view, 1), std::span<const std::span<const int64_t>>(&rows, 1),
                  z, yexp);
      }
    }
    // The host's experts run while the link and the device work on the rest.
    SLUICE_CHECK(host.host_views.empty() || z_on_host,
                 "moe: the provider handed out host views in a pass it said has none");
    if (grouped && !host.views.empty()) {
      for (const device::ExpertView& v : host.views) d.wait(v.ready);
      d.experts(op, host.views, host.view_members, z, yexp);
    }
    lease_s += lap(t);
    if (!host.host_views.empty()) host_experts(d, op, yexp, host);
    host_s += lap(t);
    // The lease ends after the work that read its views (on the CPU it has finished already).
    d.fence();
    experts.release(layer);
    release_s += lap(t);
  }
  if (counters) {
    counters->moe_route_s += route_s;
    counters->moe_lease_s += lease_s;
    counters->moe_host_s += host_s;
    counters->moe_release_s += release_s;
  }

  Buf routed = d.scratch(BufType::F32, T, R);
  d.combine(yexp, weights, routed);
  if (s.latent) {
    Buf normed = d.scratch(BufType::F32, T, R);
    d.rmsnorm(routed, w.latent_norm.v, s.norm_eps, normed);
    const LinearOut up[] = {{&w.latent_up, out}};
    d.linear(normed, up);
  } else {
    d.copy(out, routed);
  }
  if (w.has_shared) {
    Buf sh = d.scratch(BufType::F32, T, out.cols);
    mlp_forward(d, w.shared, s.act, x, sh);
    d.add(out, sh);
  }
}

void moe_predict(device::Device& d, const MoeSpec& s, const MoeWeights& w, const Param& post_norm, float eps,
                 store::ExpertProvider& experts, int layer, const Buf& m_in, MoeHost& host, int distance) {
  device::ScratchScope scope(d);
  const int64_t T = m_in.rows, E = s.router.experts, k = s.router.top_k;
  host.reserve(E, T * k);
  Buf pn = d.scratch(BufType::F32, T, m_in.cols);
  d.rmsnorm(m_in, post_norm.v, eps, pn);
  Buf logits = d.scratch(BufType::F32, T, E);
  const LinearOut outs[] = {{&w.router, logits}};
  d.linear(pn, outs);
  Buf weights = d.scratch(BufType::F32, T, k);
  route_rows(d, s, w, logits, weights, host);
  // Confidence order: chosen by the most rows first, then by the best rank a row gave it (route
  // order is descending score), then the lower id; capped at what the provider can hold.
  host.votes.assign(size_t(E), 0);
  host.best_rank.assign(size_t(E), int32_t(k));
  for (size_t m = 0; m < host.route.size(); ++m) {
    const int32_t e = host.route[m], r = int32_t(int64_t(m) % k);
    host.votes[size_t(e)] += 1;
    host.best_rank[size_t(e)] = std::min(host.best_rank[size_t(e)], r);
  }
  host.chosen.clear();
  for (int32_t e = 0; e < int32_t(E); ++e)
    if (host.votes[size_t(e)]) host.chosen.push_back(e);
  std::sort(host.chosen.begin(), host.chosen.end(), [&](int32_t a, int32_t b) {
    const int32_t va = host.votes[size_t(a)], vb = host.votes[size_t(b)];
    const int32_t ra = host.best_rank[size_t(a)], rb = host.best_rank[size_t(b)];
    return va > vb || (va == vb && (ra < rb || (ra == rb && a < b)));
  });
  if (host.chosen.size() > experts.max_batch()) host.chosen.resize(experts.max_batch());
  experts.prefetch(layer, host.chosen, distance);
}

void MlpStack::predict_ahead(device::Device& d, store::ExpertProvider* experts, size_t layer, const Buf& m_in) {
  const int ahead = experts ? experts->lookahead() : 0;
  for (int k = 1; k <= ahead; ++k) {
    const size_t next = layer + size_t(k);
    if (next >= layers.size() || !layers[next].moe) continue;
    moe_predict(d, moe, *layers[next].moe, *layers[next].post_norm, eps, *experts, int(next), m_in, host, k);
  }
}

void MlpStack::forward(device::Device& d, store::ExpertProvider* experts, size_t layer, const Buf& x, Buf out,
                       TargetCounters* counters) {
  const MlpLayer& l = layers[layer];
  if (l.moe) moe_forward(d, moe, *l.moe, *experts, int(layer), x, out, host, counters);
  else mlp_forward(d, *l.dense, dense_act, x, out);
}

}  // namespace sluice::model
