// Chooses the draft depth for each step: the depth with the most expected tokens per second, from
//  - the rolling acceptance rate of proposed tokens, and
//  - the cost of a verify pass of width w = 1 + depth. Once a width has been measured its measured
//    time is used (it includes the extra expert reads of the wider union). Before that, and for
//    the "+N experts, +M MB" line of --stats, the cost is predicted from the expert store: the
//    union of routed experts a pass reads grows by g experts per extra row (g measured from the
//    model's routing on earlier passes; before any wide pass, pessimistically one full row's worth),
//    a fraction m of the union is missing from the RAM cache (the store's recent miss rate, i.e.
//    the cache state), each miss costs one record of b bytes at the drives' current bandwidth B,
//    and compute grows by c per row (measured, else a quarter of a one-row pass's compute).
// A drafter that comes back empty (no prompt-lookup match, a text draft that does not re-encode)
// counts with the measured cost of asking it, so a free one keeps being asked and a costly one
// is switched off. Drafting is switched off when target-only steps are faster, and probed again after a pause
// that doubles after every probe that does not pay (so a hostile stretch costs almost nothing).
// The target-only time it compares against is measured, not remembered: the first (cold) step is
// not timed, two target-only steps come before any drafting, and while drafting one step in
// refresh_every runs target-only (weighted more, being rarer; more often early in a run, when
// the cache is still warming and the baseline moves most).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::runtime {

struct ControllerOptions {
  int max_depth = 8;
  int probe_every = 32;   // steps without drafting before the first probe (doubles per failed probe)
  int probe_every_max = 512;
  int probe_depth = 1;
  int refresh_every = 16;  // while drafting, one target-only step per this many keeps its time current
};

// What one step cost, as the loop measured it.
struct StepCost {
  int asked = 0;                   // drafts asked of the drafter (the depth chosen)
  int width = 1;                   // rows of the pass: 1 + drafts proposed
  int proposed = 0, accepted = 0;  // drafts proposed and accepted
  double seconds = 0;              // whole step (drafting + verify + commit)
  // From the expert store (0 when experts are resident): experts the pass asked for (its union,
  // summed over MoE layers) and how many of them had to be read.
  uint64_t union_experts = 0, missed_experts = 0;
  uint64_t expert_bytes = 0;       // bytes per expert record
  double read_bytes_per_second = 0;  // the drives' current bandwidth
};

class DraftController {
 public:
  explicit DraftController(const ControllerOptions& o = {});
  // Depth for the next step (0 = target only).
  int next_depth();
  void record(const StepCost& s);
  const std::string& last_decision() const { return decision_; }
  double acceptance() const { return accept_; }
  // Predicted seconds of a pass of `width` rows, and the expert bytes it is expected to read
  // beyond a one-row pass (exposed for tests and --stats).
  double predicted_seconds(int width) const;
  double predicted_extra_bytes(int width) const;

 private:
  double time_for(int width) const;
  int widest_measured() const;   // the widest drafted width measured so far (0: none)
  double union_growth() const;   // experts added to a pass's union per extra row
  double read_seconds(double misses) const;
  ControllerOptions o_;
  double accept_ = 0.6;              // accepted / judged drafts, from decayed sums (0.6 before any)
  double passed_ = 1.2, judged_ = 2;
  int trials_ = 0;                   // judged drafts so far (not decayed)
  int empty_asks_ = 0;               // steps where the drafter was asked and proposed nothing
  double p_empty_ = 0, ask_cost_ = 0;  // EWMA share of empty asks, and their cost beyond t1  // the prior: 2 pseudo-trials at 0.6, decaying like the rest
  std::vector<double> t_;            // EWMA seconds per step, by width (index = width)
  std::vector<double> u_;            // EWMA union experts per pass, by width
  std::vector<int> n_;               // samples per width
  double miss_rate_ = 0;             // EWMA of missed / union experts (cache state)
  double expert_bytes_ = 0, bandwidth_ = 0;
  int off_steps_ = 0, probe_every_ = 0;
  int since_single_ = 0;    // drafted steps since the last target-only one
  int refresh_gap_ = 4;     // drafted steps before the next refresh: 4, 8, ... up to refresh_every
  bool warm_ = false;       // the first step (cold caches, page faults) is not timed
  bool off_ = false, probing_ = false, have_miss_rate_ = false;
  std::string decision_;
};

}  // namespace sluice::runtime
