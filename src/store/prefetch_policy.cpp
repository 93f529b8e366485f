#include "store/prefetch_policy.h"

#include "core/error.h"
#include "store/guess_precision.h"

namespace sluice::store {

PrefetchPolicy::PrefetchPolicy(int64_t layers, bool on, int layers_ahead, double min_precision, bool idle_guesses)
    : layers_(layers),
      on_(on),
      layers_ahead_(layers_ahead),
      min_precision_(min_precision),
      idle_guesses_(idle_guesses) {
  if (layers_ahead < 1 || layers_ahead > kMaxPrefetchLayers)
    fail("--prefetch-layers ", layers_ahead, " is outside 1..", kMaxPrefetchLayers);
  if (!(min_precision >= 0 && min_precision <= 1)) fail("prefetch precision ", min_precision, " is outside 0..1");
  guesses_.resize(size_t(layers_ahead * layers));
  precision_.assign(guesses_.size() * kMaxRanks, 0.0);
}

size_t PrefetchPolicy::score(int layer, std::span<const int32_t> asked, bool* scored) {
  size_t right_next = 0;
  *scored = false;
  for (int d = 1; d <= layers_ahead_; ++d) {
    std::vector<int32_t>& guess = guesses_[at(layer, d)];
    if (guess.empty()) continue;
    const size_t right = score_guess(guess, asked, &precision_[at(layer, d) * kMaxRanks], kMaxRanks);
    if (d == 1) {
      right_next = right;
      *scored = true;
    }
    guess.clear();
  }
  return right_next;
}

void PrefetchPolicy::request_at(std::chrono::steady_clock::time_point now, double drives_idle_seconds,
                                double busy_bandwidth) {
  if (!idle_guesses_) return;
  if (requested_)
    spare_.add(std::chrono::duration<double>(now - last_request_).count(), drives_idle_seconds - idle_at_last_,
               busy_bandwidth);
  requested_ = true;
  last_request_ = now;
  idle_at_last_ = drives_idle_seconds;
}

void PrefetchPolicy::remember(int layer, int distance, std::span<const int32_t> experts) {
  guesses_[at(layer, distance)].assign(experts.begin(), experts.end());
}

bool PrefetchPolicy::earned(int layer, int distance, size_t rank) const {
  return min_precision_ <= 0 ||
         (rank < kMaxRanks && precision_[at(layer, distance) * kMaxRanks + rank] >= min_precision_);
}

PrefetchPolicy::Allowance PrefetchPolicy::allowance(int distance, bool drives_idle) const {
  if (!idle_guesses_ || !drives_idle || distance != 1) return {};
  return {spare_.idle_seconds(), spare_.bytes()};
}

}  // namespace sluice::store
