// Mixture of experts on the CPU: the router (sigmoid with correction bias and grouped top-k as
// transformers does it for DeepSeek-V3/Kimi, softmax top-k for Qwen3-MoE, top-k softmax for
// gpt-oss), the routed experts over the rows routed to each, and the per-row combine in route order
// (so which experts share a call, and the order they arrive in, never change a bit).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "device/cpu/cpu_device.h"

namespace sluice::device {

void CpuDevice::route(const RouterOp& op, const Buf& logits_b, Buf ids_b, Buf weights_b) {
  const int64_t E = op.experts, k = op.top_k, T = logits_b.rows;
  const int64_t groups = op.groups, per_group = E / std::max<int64_t>(groups, 1);
  SLUICE_CHECK(logits_b.cols == E && ids_b.rows == T && ids_b.cols == k && weights_b.rows == T && weights_b.cols == k &&
                   k > 0 && k <= E && groups >= 1 && E % groups == 0 && op.topk_groups >= 1 &&
                   op.topk_groups <= groups && (op.correction_bias.empty() || op.correction_bias.n == E),
               "route: shapes");
  ScratchScope scope(*this);
  // Rows are routed independently: slices of them over the pool, each with its own scratch.
  const int64_t slots = ThreadPool::global().size();
  float* scores_all = temp<float>(slots * E);
  float* choice_all = temp<float>(slots * E);
  int32_t* order_all = temp<int32_t>(slots * E);
  float* group_score_all = temp<float>(slots * groups);
  int64_t* group_order_all = temp<int64_t>(slots * groups);
  char* keep_all = temp<char>(slots * groups);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  row_slices(T, row_grain(4 * E), [&](int64_t s, int64_t t0, int64_t t1) {
    float* scores = scores_all + s * E;
    float* choice = choice_all + s * E;
    int32_t* order = order_all + s * E;
    float* group_score = group_score_all + s * groups;
    int64_t* group_order = group_order_all + s * groups;
    char* keep = keep_all + s * groups;
    for (int64_t t = t0; t < t1; ++t) {
      const float* lg = row_ptr(logits_b, t);
      switch (op.score) {
        case RouterScore::Sigmoid:
          for (int64_t e = 0; e < E; ++e) scores[e] = sigmoid(lg[e]);
          break;
        case RouterScore::Softmax:
          std::copy(lg, lg + E, scores);
          softmax(scores, E);
          break;
        case RouterScore::TopkSoftmax:
          std::copy(lg, lg + E, scores);
          break;
      }
      for (int64_t e = 0; e < E; ++e) choice[e] = op.correction_bias.empty() ? scores[e] : scores[e] + op.correction_bias.p[e];
      if (groups > 1) {
        // Group score = sum of the group's two best choice scores; keep the topk_groups best groups
        // (a stable order: equal groups keep their index order).
        for (int64_t gi = 0; gi < groups; ++gi) {
          float b1 = neg_inf, b2 = b1;
          for (int64_t e = gi * per_group; e < (gi + 1) * per_group; ++e) {
            float v = choice[e];
            if (v > b1) {
              b2 = b1;
              b1 = v;
            } else if (v > b2) {
              b2 = v;
            }
          }
          group_score[gi] = b1 + b2;
          int64_t j = gi;
          for (; j > 0 && group_score[group_order[j - 1]] < group_score[gi]; --j) group_order[j] = group_order[j - 1];
          group_order[j] = gi;
        }
        std::fill(keep, keep + groups, 0);
        for (int64_t i = 0; i < op.topk_groups; ++i) keep[group_order[i]] = 1;
        for (int64_t e = 0; e < E; ++e)
          if (!keep[e / per_group]) choice[e] = neg_inf;
      }
      // Top-k by choice score, descending; ties go to the lower expert id.
      std::iota(order, order + E, 0);
      std::partial_sort(order, order + k, order + E, [&](int32_t a, int32_t b) {
        float ca = choice[a], cb = choice[b];
        return ca > cb || (ca == cb && a < b);
      });
      int32_t* ids = irow_ptr(ids_b, t);
      float* w = row_ptr(weights_b, t);
      for (int64_t i = 0; i < k; ++i) {
        ids[i] = order[i];
        w[i] = scores[order[i]];
      }
      if (op.score == RouterScore::TopkSoftmax) softmax(w, k);
      float sum = 0.0f;
      for (int64_t i = 0; i < k; ++i) sum += w[i];
      for (int64_t i = 0; i < k; ++i) {
        float wgt = w[i];
        if (op.renormalize) wgt /= (sum + op.renorm_eps);
        w[i] = wgt * op.scaling;
      }
    }
  });
}

namespace {

// The expert's intermediate size, after checking its views' shapes against the input width R.
int64_t checked_intermediate(const ExpertView& ew, int64_t R) {
  const int64_t I = ew.intermediate();
  SLUICE_CHECK(ew.gate.cols == R && ew.down.rows == R && ew.down.cols == I &&
                   (ew.gate_up_interleaved ? ew.gate.rows == 2 * I && ew.up.empty()
                                           : ew.up.rows == I && ew.up.cols == R),
               "experts: view shapes");
  return I;
}

}  // namespace

void CpuDevice::experts(const ExpertsOp& op, std::span<const ExpertView> views,
                        std::span<const std::span<const int64_t>> members, const Buf& z, Buf yexp) {
  SLUICE_CHECK(views.size() == members.size(), "experts: ", views.size(), " views for ", members.size(), " member lists");
  const int64_t R = z.cols, k = op.top_k;
  SLUICE_CHECK(yexp.cols == R && yexp.rows == z.rows * k, "experts: yexp shape");
  bool few_rows = views.size() > 1;
  for (const auto& m : members) few_rows = few_rows && m.size() <= kBatchedExpertRows;
  if (few_rows) return experts_batched(op, views, members, z, yexp);
  for (size_t e = 0; e < views.size(); ++e) {
    const ExpertView& ew = views[e];
    const std::span<const int64_t> rows = members[e];
    const int64_t n = int64_t(rows.size()), I = checked_intermediate(ew, R);
    if (n == 0) continue;
    ScratchScope scope(*this);
    float* G = temp<float>(n * R);
    for (int64_t i = 0; i < n; ++i) {
      const float* src = row_ptr(z, rows[size_t(i)] / k);
      std::copy(src, src + R, G + i * R);
    }
    float* h1 = temp<float>(n * I);
    float* h3 = temp<float>(n * I);
    if (ew.gate_up_interleaved) {
      // One product over the interleaved rows, then gate (even) and up (odd) columns apart.
      float* gu = temp<float>(n * 2 * I);
      device::linear(isa(), ew.gate, G, R, n, gu, 2 * I);
      for (int64_t i = 0; i < n * I; ++i) {
        h1[i] = gu[2 * i];
        h3[i] = gu[2 * i + 1];
      }
    } else {
      device::linear(isa(), ew.gate, G, R, n, h1, I);
      device::linear(isa(), ew.up, G, R, n, h3, I);
    }
    gated_activation(isa(), op.act, h1, h3, n * I);
    flops_ += 2 * uint64_t(n) * uint64_t(R) * uint64_t(3 * I);
    float* y = temp<float>(n * R);
    device::linear(isa(), ew.down, h1, I, n, y, R);
    for (int64_t i = 0; i < n; ++i) std::copy(y + i * R, y + (i + 1) * R, row_ptr(yexp, rows[size_t(i)]));
  }
}

// The same products as the loop above, each expert's gate and up of every expert in one fork and
// join of the pool and every down in another (two instead of three per expert: a decode step's
// experts are a few MB each, which the pool streams in tens of microseconds).
void CpuDevice::experts_batched(const ExpertsOp& op, std::span<const ExpertView> views,
                                std::span<const std::span<const int64_t>> members, const Buf& z, Buf yexp) {
  const int64_t R = z.cols, k = op.top_k, E = int64_t(views.size());
  ScratchScope scope(*this);
  int64_t* first = temp<int64_t>(E + 1);  // expert e's rows are [first[e], first[e + 1]) of G, H1, H3, Y
  int64_t* width = temp<int64_t>(E);      // its intermediate size
  first[0] = 0;
  int64_t units = 0;  // Σ n·I
  for (int64_t e = 0; e < E; ++e) {
    width[e] = checked_intermediate(views[size_t(e)], R);
    first[e + 1] = first[e] + int64_t(members[size_t(e)].size());
    units += int64_t(members[size_t(e)].size()) * width[e];
  }
  float* G = temp<float>(first[E] * R);
  float* H1 = temp<float>(units * 2);  // per expert: n·I gate values (n·2I interleaved), then n·I up
  float* Y = temp<float>(first[E] * R);
  LinearItem* items = temp<LinearItem>(2 * E);
  int64_t at = 0, n_items = 0;
  for (int64_t e = 0; e < E; ++e) {
    const ExpertView& ew = views[size_t(e)];
    const std::span<const int64_t> rows = members[size_t(e)];
    const int64_t n = int64_t(rows.size()), I = width[e];
    for (int64_t i = 0; i < n; ++i) {
      const float* src = row_ptr(z, rows[size_t(i)] / k);
      std::copy(src, src + R, G + (first[e] + i) * R);
    }
    float* h = H1 + at;
    if (ew.gate_up_interleaved) {
      items[n_items++] = {&ew.gate, G + first[e] * R, R, n, h, 2 * I};
    } else {
      items[n_items++] = {&ew.gate, G + first[e] * R, R, n, h, I};
      items[n_items++] = {&ew.up, G + first[e] * R, R, n, h + n * I, I};
    }
    at += 2 * n * I;
  }
  device::linear_batch(isa(), std::span<const LinearItem>(items, size_t(n_items)));
  at = 0;
  n_items = 0;
  for (int64_t e = 0; e < E; ++e) {
    const ExpertView& ew = views[size_t(e)];
    const int64_t n = first[e + 1] - first[e], I = width[e];
    float* h1 = H1 + at;
    float* h3 = h1 + n * I;
    if (ew.gate_up_interleaved) {
      // Gate (even) and up (odd) columns apart, as the loop above does.
      float* gu = temp<float>(n * 2 * I);
      std::copy(h1, h1 + n * 2 * I, gu);
      for (int64_t i = 0; i < n * I; ++i) {
        h1[i] = gu[2 * i];
        h3[i] = gu[2 * i + 1];
      }
    }
    gated_activation(isa(), op.act, h1, h3, n * I);
    flops_ += 2 * uint64_t(n) * uint64_t(R) * uint64_t(3 * I);
    items[n_items++] = {&ew.down, h1, I, n, Y + first[e] * R, R};
    at += 2 * n * I;
  }
  device::linear_batch(isa(), std::span<const LinearItem>(items, size_t(n_items)));
  for (int64_t e = 0; e < E; ++e) {
    const std::span<const int64_t> rows = members[size_t(e)];
    for (size_t i = 0; i < rows.size(); ++i)
      std::copy(Y + (first[e] + int64_t(i)) * R, Y + (first[e] + int64_t(i) + 1) * R, row_ptr(yexp, rows[i]));
  }
}

void CpuDevice::combine(const Buf& yexp, const Buf& weights, Buf out) {
  const int64_t T = out.rows, R = out.cols, k = weights.cols;
  SLUICE_CHECK(weights.rows == T && yexp.rows == T * k && yexp.cols == R, "combine: shapes");
  row_slices(T, row_grain(R * k), [&](int64_t, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* o = row_ptr(out, t);
      std::fill(o, o + R, 0.0f);
      const float* w = row_ptr(weights, t);
      for (int64_t i = 0; i < k; ++i) axpy(w[i], row_ptr(yexp, t * k + i), o, R);
    }
  });
}

}  // namespace sluice::device
