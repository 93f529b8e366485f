// Stop sequences over streamed text: releases text as soon as it cannot be the start of a stop
// sequence, withholds the longest tail that still could be, and reports a hit (the text is cut
// before the stop sequence, which is never sent).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace sluice::serve {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends text; returns what may be sent now. After a hit it returns the text before the stop
  // sequence (once) and then nothing.
  std::string push(std::string_view text);
  // End of generation: what is still withheld.
  std::string flush();
  bool hit() const { return hit_; }
  // The stop sequence that ended the text (the earliest; "" before a hit).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_, matched_;
  bool hit_ = false;
};

}  // namespace sluice::serve
