// Helpers of the state tests (state cache, prefix cache): fixture directories and made-up prompts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::testing {

inline std::string fixture_dir(const std::string& name) {
  return std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/" + name;
}

// n token ids below 97, a different sequence for each salt.
inline std::vector<int32_t> tokens_of(int n, int salt = 0) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(int32_t((i * 37 + salt * 11 + 5) % 97));
  return p;
}

inline std::vector<int32_t> join(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace sluice::testing
