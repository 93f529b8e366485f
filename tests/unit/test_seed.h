// The seed of the randomized op and kernel tests: fresh inputs on every run, printed with any
// failure so a failing case can be replayed with SLUICE_TEST_SEED=<seed>.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace sluice::testing {

inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    if (const char* env = std::getenv("SLUICE_TEST_SEED")) return uint64_t(std::stoull(env));
    return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  }();
  return seed;
}

}  // namespace sluice::testing
