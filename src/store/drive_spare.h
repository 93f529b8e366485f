// How many bytes the drives could read in one layer's time beyond what the engine reads: the
// allowance of --prefetch-idle's guesses. A layer's period runs from one expert request to the
// next; in it the drives idle (no read queued or in flight) for some of the time, in which they
// could have read idle time × bandwidth. A guess is read only if that many bytes are left and its
// own read fits in the idle time: drives that are the bottleneck idle only while a layer computes,
// too briefly to read a record, and a guess then would delay the next demand read; drives that
// idle between small reads leave most of the period, and guesses in it cost nothing.
#pragma once
#include <algorithm>

namespace sluice::store {

class DriveSpare {
 public:
  // One period: `seconds` long, the drives idle `idle_seconds` of it, able to read `bandwidth`
  // bytes/s. Meaningless periods (no length, no bandwidth) are ignored.
  void add(double seconds, double idle_seconds, double bandwidth) {
    if (!(seconds > 0) || !(bandwidth > 0)) return;
    const double idle = std::clamp(idle_seconds / seconds, 0.0, 1.0);
    if (!measured_) {
      period_ = seconds;
      idle_ = idle;
      measured_ = true;
    } else {
      // A period far longer than usual (a pause between requests, a prefill pass) moves the
      // average as one twice the average would: an allowance never jumps on one outlier.
      period_ = kKeep * period_ + (1 - kKeep) * std::min(seconds, 2 * period_);
      idle_ = kKeep * idle_ + (1 - kKeep) * idle;
    }
    bandwidth_ = bandwidth;
  }
  // The drives' idle time in a layer's period: idle share × period, each averaged over recent
  // periods; 0 before the first period is measured.
  double idle_seconds() const { return measured_ ? idle_ * period_ : 0.0; }
  // What the drives could read in it.
  double bytes() const { return idle_seconds() * bandwidth_; }
  double idle_share() const { return idle_; }

 private:
  static constexpr double kKeep = 0.8;  // EWMA weight of the past, per period
  bool measured_ = false;
  double period_ = 0, idle_ = 0, bandwidth_ = 0;
};

}  // namespace sluice::store
