// Prompt-lookup drafting over the token history.
#include "runtime/speculate/drafter.h"

#include <algorithm>

namespace sluice::runtime {

std::vector<int32_t> NgramDrafter::propose(std::span<const int32_t> history, int max_tokens) {
  const size_t n_hist = history.size();
  if (max_tokens <= 0 || n_hist < size_t(min_n_) + 1) return {};
  const size_t start = n_hist > window_ ? n_hist - window_ : 0;
  for (int n = std::min<int>(max_n_, int(n_hist) - 1); n >= min_n_; --n) {
    std::span<const int32_t> suffix = history.subspan(n_hist - size_t(n));
    // Most recent earlier match first.
    for (size_t pos = n_hist - size_t(n); pos-- > start;) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + long(pos))) continue;
      size_t from = pos + size_t(n);
      size_t count = std::min<size_t>(size_t(max_tokens), n_hist - from);
      if (count == 0) continue;
      return std::vector<int32_t>(history.begin() + long(from), history.begin() + long(from + count));
    }
  }
  return {};
}

}  // namespace sluice::runtime
