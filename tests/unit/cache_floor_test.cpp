// The bench's cache floors: Belady's MIN against the true optimum found by trying every admission
// and eviction choice on small random traces, LRU against a plain recency list, and the edges.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "bench/cache_floor.h"
#include "test_seed.h"

namespace sluice::bench {
namespace {

// Fewest reads any cache of `cap` slots can make serving keys[i..] from the cached set `mask`:
// on a miss, read and then keep nothing new, fill a free slot, or replace any cached key.
uint64_t optimum(const std::vector<uint32_t>& keys, size_t i, uint32_t mask, uint64_t cap,
                 std::map<std::pair<size_t, uint32_t>, uint64_t>& memo) {
  if (i == keys.size()) return 0;
  auto at = memo.find({i, mask});
  if (at != memo.end()) return at->second;
  const uint32_t bit = 1u << keys[i];
  uint64_t best;
  if (mask & bit) {
    best = optimum(keys, i + 1, mask, cap, memo);
  } else {
    best = optimum(keys, i + 1, mask, cap, memo);  // read, not kept
    if (cap > 0) {
      if (uint64_t(__builtin_popcount(mask)) < cap) best = std::min(best, optimum(keys, i + 1, mask | bit, cap, memo));
      for (uint32_t m = mask; m; m &= m - 1) {
        const uint32_t victim = m & (~m + 1);
        best = std::min(best, optimum(keys, i + 1, (mask & ~victim) | bit, cap, memo));
      }
    }
    best += 1;
  }
  memo[{i, mask}] = best;
  return best;
}

uint64_t lru_by_list(const std::vector<uint32_t>& keys, uint64_t cap) {
  std::vector<uint32_t> recent;  // most recent last
  uint64_t reads = 0;
  for (uint32_t k : keys) {
    auto it = std::find(recent.begin(), recent.end(), k);
    if (it != recent.end()) {
      recent.erase(it);
    } else {
      ++reads;
      if (cap == 0) continue;
      if (recent.size() >= cap) recent.erase(recent.begin());
    }
    recent.push_back(k);
  }
  return reads;
}

// The optimum from the best starting content: the least over every start of at most cap keys.
uint64_t optimum_any_start(const std::vector<uint32_t>& keys, uint32_t keyspace, uint64_t cap) {
  uint64_t best = ~uint64_t(0);
  for (uint32_t mask = 0; mask < (1u << keyspace); ++mask) {
    if (uint64_t(__builtin_popcount(mask)) > cap) continue;
    std::map<std::pair<size_t, uint32_t>, uint64_t> memo;
    best = std::min(best, optimum(keys, 0, mask, cap, memo));
  }
  return best;
}

// The fewest reads of a cache that holds one fixed set of at most cap keys, by trying every set.
uint64_t best_fixed_set(const std::vector<uint32_t>& keys, uint32_t keyspace, uint64_t cap) {
  uint64_t best = ~uint64_t(0);
  for (uint32_t mask = 0; mask < (1u << keyspace); ++mask) {
    if (uint64_t(__builtin_popcount(mask)) > cap) continue;
    uint64_t reads = 0;
    for (uint32_t k : keys) reads += !(mask >> k & 1u);
    best = std::min(best, reads);
  }
  return best;
}

TEST(CacheFloor, MinIsTheOptimumAndLruIsRecencyOnSmallTraces) {
  std::mt19937_64 rng(testing::test_seed());
  int traces = 0;
  for (int t = 0; t < 600; ++t) {
    const uint32_t keyspace = 2 + uint32_t(rng() % 6);
    const size_t n = 1 + size_t(rng() % 14);
    const uint64_t cap = rng() % 5;
    std::vector<uint32_t> keys(n);
    for (auto& k : keys) k = uint32_t(rng() % keyspace);
    const size_t split = size_t(rng() % (n + 1));
    const std::vector<uint32_t> prefix(keys.begin(), keys.begin() + long(split)), rest(keys.begin() + long(split), keys.end());
    const CacheFloor f = cache_floor(keys, cap, split);
    std::map<std::pair<size_t, uint32_t>, uint64_t> memo;
    ASSERT_EQ(f.min_before, optimum(prefix, 0, 0, cap, memo)) << "trace " << t << " capacity " << cap;
    ASSERT_EQ(f.min_after, optimum_any_start(rest, keyspace, cap)) << "trace " << t << " capacity " << cap;
    memo.clear();
    ASSERT_EQ(f.min_all, optimum(keys, 0, 0, cap, memo)) << "trace " << t;
    ASSERT_LE(f.min_all, f.lru_before + f.lru_after);
    ASSERT_LE(f.min_before + f.min_after, f.min_all);
    ASSERT_EQ(f.lru_before + f.lru_after, lru_by_list(keys, cap)) << "trace " << t << " capacity " << cap;
    ASSERT_EQ(f.lru_before, lru_by_list(prefix, cap));
    ASSERT_LE(f.min_before, f.lru_before);
    ASSERT_LE(f.min_after, f.lru_after);
    ASSERT_EQ(f.static_after, best_fixed_set(rest, keyspace, cap)) << "trace " << t << " capacity " << cap;
    ASSERT_LE(f.min_after, f.static_after);
    ++traces;
  }
  EXPECT_EQ(traces, 600);
}

TEST(CacheFloor, Edges) {
  const std::vector<uint32_t> keys = {3, 1, 3, 2, 1, 3, 2, 2, 0};
  const CacheFloor none = cache_floor(keys, 0, keys.size());
  EXPECT_EQ(none.min_before, keys.size());
  EXPECT_EQ(none.lru_before, keys.size());
  const CacheFloor all = cache_floor(keys, 4, 0);
  EXPECT_EQ(all.distinct, 4u);
  EXPECT_EQ(all.min_after, 0u);  // all four fit from the start
  EXPECT_EQ(all.lru_after, 4u);  // LRU starts empty: each expert read once
  // Two slots on 3 1 3 2 1 3 2 2 0 from empty: MIN reads 3, 1, 2, (1 or 3 again), 0 = 5; LRU 7.
  EXPECT_EQ(min_reads(keys, 2, false), 5u);
  const CacheFloor two = cache_floor(keys, 2, 4);
  EXPECT_EQ(two.lru_before + two.lru_after, 7u);
  EXPECT_EQ(cache_floor(std::vector<uint32_t>{}, 3, 0).accesses, 0u);
}

}  // namespace
}  // namespace sluice::bench
