// Draft depth control from measured acceptance, measured step times and the expert store's
// read costs (see controller.h for the cost model).
#include "runtime/speculate/controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sluice::runtime {
namespace {

constexpr double kEwma = 0.2;

void ewma(double& v, double x, bool first) { v = first ? x : (1 - kEwma) * v + kEwma * x; }

}  // namespace

DraftController::DraftController(const ControllerOptions& o) : o_(o) {
  o_.max_depth = std::clamp(o_.max_depth, 0, 64);
  o_.probe_every = std::max(1, o_.probe_every);
  o_.probe_every_max = std::max(o_.probe_every, o_.probe_every_max);
  probe_every_ = o_.probe_every;
  t_.assign(size_t(o_.max_depth + 2), 0.0);
  u_.assign(size_t(o_.max_depth + 2), 0.0);
  n_.assign(size_t(o_.max_depth + 2), 0);
}

double DraftController::read_seconds(double misses) const {
  return bandwidth_ > 0 ? misses * expert_bytes_ / bandwidth_ : 0.0;
}

int DraftController::widest_measured() const {
  for (int w = int(t_.size()) - 1; w >= 2; --w)
    if (n_[size_t(w)] > 0) return w;
  return 0;
}

double DraftController::union_growth() const {
  // Before any wider pass, pessimistically a whole row's worth of experts per extra row.
  const int w = widest_measured();
  return w > 0 ? std::max(0.0, (u_[size_t(w)] - u_[1]) / (w - 1)) : u_[1];
}

double DraftController::predicted_seconds(int width) const {
  if (n_[1] == 0) return 1.0;  // nothing measured yet
  const double read1 = read_seconds(u_[1] * miss_rate_);
  const double compute1 = std::max(0.0, t_[1] - read1);
  // Compute growth per extra row, from the widest measured pass (else a quarter of a row).
  const int w = widest_measured();
  const double c = w > 0 ? std::max(0.0, (t_[size_t(w)] - read_seconds(u_[size_t(w)] * miss_rate_) - compute1) / (w - 1))
                         : 0.25 * compute1;
  return compute1 + c * (width - 1) + read_seconds((u_[1] + union_growth() * (width - 1)) * miss_rate_);
}

double DraftController::predicted_extra_bytes(int width) const {
  return union_growth() * (width - 1) * miss_rate_ * expert_bytes_;
}

double DraftController::time_for(int width) const {
  // One sample of a width is noisy (a page fault, a read queued behind a prefetch): until a
  // second one, it is averaged with the prediction.
  const int n = n_[size_t(width)];
  if (n >= 2 || width == 1) return n > 0 ? t_[size_t(width)] : predicted_seconds(width);
  return n == 1 ? 0.5 * (t_[size_t(width)] + predicted_seconds(width)) : predicted_seconds(width);
}

int DraftController::next_depth() {
  char buf[320];
  if (off_) {
    if (++off_steps_ < probe_every_) {
      std::snprintf(buf, sizeof buf, "off (target-only steps were faster; probe in %d steps)", probe_every_ - off_steps_);
      decision_ = buf;
      return 0;
    }
    off_ = false;
    off_steps_ = 0;
    probing_ = true;
    std::snprintf(buf, sizeof buf, "probe depth %d (acceptance %.2f)", std::min(o_.probe_depth, o_.max_depth), accept_);
    decision_ = buf;
    return std::min(o_.probe_depth, o_.max_depth);
  }
  if (n_[1] < 2 || o_.max_depth == 0) {  // measure target-only speed first
    decision_ = "depth 0 (measuring the target-only step)";
    return 0;
  }
  if (since_single_ >= std::min(refresh_gap_, o_.refresh_every)) {
    refresh_gap_ = std::min(2 * refresh_gap_, o_.refresh_every);
    decision_ = "depth 0 (refreshing the target-only time)";
    return 0;
  }
  // A drafter may come back empty (prompt lookup without a match, a text draft that does not
  // re-encode): such a step yields one token at t1 plus what asking cost. With p_empty the share
  // of asks that came back empty, depth d yields (1-p)·E[tokens | d drafts] + p tokens in
  // (1-p)·t(d+1) + p·(t1 + ask_cost) seconds.
  // When asking costs nothing measurable, an empty answer loses nothing: choose as if the
  // drafter always answered (it is asked every step, and drafts when it has something).
  const double t1 = time_for(1);
  const bool free_to_ask = ask_cost_ <= 0.02 * t1;
  const double pe = free_to_ask ? 0.0 : p_empty_;
  int best = 0;
  double best_rate = 1.0 / t1;
  for (int d = 1; d <= o_.max_depth; ++d) {
    double expected = accept_ >= 0.999 ? d + 1.0 : (1.0 - std::pow(accept_, d + 1)) / (1.0 - accept_);
    double rate = ((1 - pe) * expected + pe) / ((1 - pe) * time_for(d + 1) + pe * (t1 + std::max(0.0, ask_cost_)));
    if (rate > best_rate * 1.02) {  // a 2 % margin so noise does not turn drafting on
      best = d;
      best_rate = rate;
    }
  }
  const int w = best + 1;
  std::snprintf(buf, sizeof buf,
                "depth %d (acceptance %.2f, empty %.2f%s; %d-row pass %.2f ms %s, +%.0f KB expert reads over 1 row; "
                "expected %.1f tok/s vs %.1f target-only)",
                best, accept_, p_empty_, free_to_ask ? " free" : "", w, time_for(w) * 1e3, n_[size_t(w)] > 0 ? "measured" : "predicted",
                predicted_extra_bytes(w) / 1e3, best_rate, 1.0 / t1);
  decision_ = buf;
  // Turning off needs evidence, not just a prediction: a measured drafted pass and two judged
  // drafts, or two asks that came back empty. Until then a losing-looking drafter is tried at
  // depth 1, the cheapest check.
  int drafted_passes = 0;
  for (size_t v = 2; v < n_.size(); ++v) drafted_passes += n_[v];
  if (best == 0 && !((drafted_passes >= 1 && trials_ >= 2) || (empty_asks_ >= 2 && !free_to_ask))) {
    std::snprintf(buf, sizeof buf, "depth 1 (exploring: %d drafted passes, %d judged drafts so far; acceptance %.2f)",
                  drafted_passes, trials_, accept_);
    decision_ = buf;
    probing_ = false;
    return 1;
  }
  if (best == 0 && n_[1] >= 3) {
    off_ = true;
    off_steps_ = 0;
    // A probe that did not pay doubles the pause before the next one.
    probe_every_ = probing_ ? std::min(2 * probe_every_, o_.probe_every_max) : o_.probe_every;
  }
  if (best > 0) probe_every_ = o_.probe_every;
  probing_ = false;
  return best;
}

void DraftController::record(const StepCost& s) {
  if (s.asked > 0 && s.proposed == 0) {
    // The drafter was asked and had nothing: the step's time is t1 plus the asking, so it must
    // not be taken for a target-only time.
    empty_asks_ += 1;
    since_single_ += 1;  // not a target-only time either: the refresh steps keep t1 current
    p_empty_ = 0.8 * p_empty_ + 0.2;
    // Not clamped per sample: timing noise averages out instead of adding up.
    if (n_[1] > 0) ask_cost_ = 0.8 * ask_cost_ + 0.2 * (s.seconds - t_[1]);
    return;
  }
  if (s.asked > 0) p_empty_ = 0.8 * p_empty_;
  const int width = std::clamp(s.width, 1, int(t_.size()) - 1);
  const bool refresh = width == 1 && since_single_ > 0;
  since_single_ = width == 1 ? 0 : since_single_ + 1;
  if (!warm_) {  // the first step pays for cold caches: its time says nothing about the next ones
    warm_ = true;
    return;
  }
  const bool first = n_[size_t(width)] == 0;
  double& t = t_[size_t(width)];
  if (refresh)
    t = 0.25 * t + 0.75 * s.seconds;
  else
    ewma(t, s.seconds, first);
  if (s.union_experts > 0) {
    ewma(u_[size_t(width)], double(s.union_experts), first);
    ewma(miss_rate_, double(s.missed_experts) / double(s.union_experts), !have_miss_rate_);
    have_miss_rate_ = true;
  }
  if (s.expert_bytes > 0) expert_bytes_ = double(s.expert_bytes);
  if (s.read_bytes_per_second > 0) bandwidth_ = s.read_bytes_per_second;
  n_[size_t(width)] += 1;
  if (s.proposed > 0) {
    // Each proposed token is a trial until the first rejection; later ones were never judged.
    // The rate is a ratio of (decayed) sums, not a mean of per-step ratios: k/(k+1) per step
    // is biased low when the number of accepted drafts k is geometric.
    const int trials = std::min(s.proposed, s.accepted + 1);
    trials_ += trials;
    judged_ = 0.9 * judged_ + trials;
    passed_ = 0.9 * passed_ + s.accepted;
    accept_ = passed_ / judged_;
  }
}

}  // namespace sluice::runtime
