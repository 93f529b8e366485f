// Chooses the draft depth for each step from measured numbers: the rolling acceptance rate of
// proposed tokens and the measured time of verify passes by width (which includes the extra
// expert reads the union of a wider pass costs). It picks the depth with the most expected
// tokens per second, turns drafting off when target-only steps are faster, and probes again later.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::runtime {

struct ControllerOptions {
  int max_depth = 8;
  int probe_every = 32;  // steps without drafting before probing again
  int probe_depth = 2;
};

class DraftController {
 public:
  explicit DraftController(const ControllerOptions& o = {});
  // Depth for the next step (0 = target only).
  int next_depth();
  // Outcome of a step: the width of the pass (1 + drafts actually proposed), tokens accepted,
  // and its duration.
  void record(int width, int proposed, int accepted, double seconds);
  const std::string& last_decision() const { return decision_; }
  double acceptance() const { return accept_; }

 private:
  double time_for(int width) const;
  ControllerOptions o_;
  double accept_ = 0.6;              // EWMA of accepted / proposed
  std::vector<double> t_;            // EWMA seconds per pass, by width (index = width)
  std::vector<int> n_;               // samples per width
  int off_steps_ = 0;
  bool off_ = false;
  std::string decision_;
};

}  // namespace sluice::runtime
