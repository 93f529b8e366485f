// How often guesses at a layer's routes turn out right, rank by rank: an average that moves a
// fifth of the way towards 1 (the expert guessed at that rank was asked for) or 0 at every scored
// guess. The RAM store gates reads ahead on it and the device tier copies ahead.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace sluice::store {

// Scores `guess` (confidence order) against `asked` (ascending, as begin() receives it): the
// precision of each of its first `ranks` ranks moves; returns how many guessed experts were asked.
inline size_t score_guess(std::span<const int32_t> guess, std::span<const int32_t> asked, double* precision,
                          size_t ranks) {
  size_t right = 0;
  for (size_t r = 0; r < guess.size(); ++r) {
    const bool hit = std::binary_search(asked.begin(), asked.end(), guess[r]);
    right += hit;
    if (r < ranks) precision[r] = 0.8 * precision[r] + 0.2 * (hit ? 1.0 : 0.0);
  }
  return right;
}

}  // namespace sluice::store
