// Draft depth control from measured acceptance and pass times.
#include "runtime/speculate/controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sluice::runtime {

DraftController::DraftController(const ControllerOptions& o) : o_(o) {
  o_.max_depth = std::clamp(o_.max_depth, 0, 64);
  t_.assign(size_t(o_.max_depth + 2), 0.0);
  n_.assign(size_t(o_.max_depth + 2), 0);
}

double DraftController::time_for(int width) const {
  if (n_[size_t(width)] > 0) return t_[size_t(width)];
  // Unmeasured width: interpolate linearly from the nearest measured widths.
  int lo = -1, hi = -1;
  for (int w = width - 1; w >= 1; --w)
    if (n_[size_t(w)] > 0) {
      lo = w;
      break;
    }
  for (int w = width + 1; w < int(t_.size()); ++w)
    if (n_[size_t(w)] > 0) {
      hi = w;
      break;
    }
  if (lo > 0 && hi > 0) return t_[size_t(lo)] + (t_[size_t(hi)] - t_[size_t(lo)]) * (width - lo) / double(hi - lo);
  if (lo > 0) {
    // Extrapolate with the slope of the two largest measured widths, else +25 % per row.
    int lo2 = -1;
    for (int w = lo - 1; w >= 1; --w)
      if (n_[size_t(w)] > 0) {
        lo2 = w;
        break;
      }
    double slope = lo2 > 0 ? std::max(0.0, (t_[size_t(lo)] - t_[size_t(lo2)]) / (lo - lo2)) : 0.25 * t_[size_t(lo)];
    return t_[size_t(lo)] + slope * (width - lo);
  }
  if (hi > 0) return t_[size_t(hi)];
  return 1.0;
}

int DraftController::next_depth() {
  char buf[256];
  if (off_) {
    if (++off_steps_ < o_.probe_every) {
      decision_ = "off (target-only steps were faster)";
      return 0;
    }
    off_ = false;
    off_steps_ = 0;
    std::snprintf(buf, sizeof buf, "probe depth %d (acceptance %.2f)", o_.probe_depth, accept_);
    decision_ = buf;
    return std::min(o_.probe_depth, o_.max_depth);
  }
  if (n_[1] == 0 || o_.max_depth == 0) {  // measure target-only speed first
    decision_ = "depth 0 (measuring the target-only step)";
    return 0;
  }
  int best = 0;
  double best_rate = 1.0 / time_for(1);
  for (int d = 1; d <= o_.max_depth; ++d) {
    double expected = accept_ >= 0.999 ? d + 1.0 : (1.0 - std::pow(accept_, d + 1)) / (1.0 - accept_);
    double rate = expected / time_for(d + 1);
    if (rate > best_rate * 1.02) {  // a 2 % margin so noise does not turn drafting on
      best = d;
      best_rate = rate;
    }
  }
  std::snprintf(buf, sizeof buf, "depth %d (acceptance %.2f, t1 %.2f ms, expected %.2f tok/s vs %.2f target-only)",
                best, accept_, time_for(1) * 1e3, best_rate, 1.0 / time_for(1));
  decision_ = buf;
  if (best == 0 && n_[1] >= 3) {
    off_ = true;
    off_steps_ = 0;
  }
  return best;
}

void DraftController::record(int width, int proposed, int accepted, double seconds) {
  width = std::clamp(width, 1, int(t_.size()) - 1);
  double& t = t_[size_t(width)];
  t = n_[size_t(width)] == 0 ? seconds : 0.8 * t + 0.2 * seconds;
  n_[size_t(width)] += 1;
  if (proposed > 0) {
    // Each proposed token is a trial until the first rejection; later ones were never judged.
    int trials = std::min(proposed, accepted + 1);
    double rate = double(accepted) / trials;
    accept_ = 0.7 * accept_ + 0.3 * rate;
  }
}

}  // namespace sluice::runtime
