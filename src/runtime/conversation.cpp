// Tape matching for conversation state reuse.
#include "runtime/conversation.h"

#include <algorithm>

namespace sluice::runtime {

size_t reusable_prefix(std::span<const int32_t> tape, std::span<const int32_t> prompt) {
  if (tape.empty() || prompt.size() <= tape.size()) return 0;
  return std::equal(tape.begin(), tape.end(), prompt.begin()) ? tape.size() : 0;
}

size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  return size_t(std::mismatch(a.begin(), a.begin() + std::ptrdiff_t(n), b.begin()).first - a.begin());
}

std::vector<int32_t> tape_after(std::span<const int32_t> prompt, std::span<const int32_t> generated) {
  std::vector<int32_t> tape(prompt.begin(), prompt.end());
  if (!generated.empty()) tape.insert(tape.end(), generated.begin(), generated.end() - 1);
  return tape;
}

}  // namespace sluice::runtime
