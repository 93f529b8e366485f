// Stop-sequence matching with the minimal withheld tail.
#include "serve/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace sluice::serve {

std::string StopMatcher::push(std::string_view text) {
  if (hit_) return {};
  held_.append(text);
  if (stops_.empty()) return std::exchange(held_, {});
  // The earliest occurrence of any stop sequence ends the text.
  size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    size_t at = held_.find(s);
    if (at < cut) {
      cut = at;
      matched_ = s;
    }
  }
  if (cut != std::string::npos) {
    hit_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Withhold the longest suffix that is a proper prefix of some stop sequence.
  size_t keep = 0;
  for (const auto& s : stops_) {
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() {
  if (hit_) return {};
  return std::exchange(held_, {});
}

}  // namespace sluice::serve
