// Belady's MIN and LRU over an access sequence, in O(n log n).
#include "bench/cache_floor.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <list>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace sluice::bench {

uint64_t min_reads(std::span<const uint32_t> keys, uint64_t capacity, bool free_start) {
  const uint64_t n = keys.size();
  constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  // next[i]: the index of the next access to keys[i] after i, or kNever; first: each key's first.
  std::vector<uint64_t> next(n, kNever);
  std::unordered_map<uint32_t, uint64_t> first;
  for (uint64_t i = n; i-- > 0;) {
    auto it = first.find(keys[i]);
    if (it != first.end()) next[i] = it->second;
    first[keys[i]] = i;
  }
  // The cache as (next use, key), the furthest last.
  std::set<std::pair<uint64_t, uint32_t>> cached;
  std::unordered_map<uint32_t, uint64_t> next_of;  // cached key -> its next use
  if (free_start && capacity > 0) {
    // Holding the experts needed soonest is the best start (the exchange argument behind MIN).
    std::vector<std::pair<uint64_t, uint32_t>> by_first;
    for (const auto& [k, i] : first) by_first.push_back({i, k});
    std::sort(by_first.begin(), by_first.end());
    if (by_first.size() > capacity) by_first.resize(size_t(capacity));
    for (const auto& [i, k] : by_first) {
      cached.insert({i, k});
      next_of[k] = i;
    }
  }
  uint64_t reads = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t k = keys[i];
    auto it = next_of.find(k);
    if (it != next_of.end()) {
      cached.erase({it->second, k});
      it->second = next[i];
      cached.insert({next[i], k});
      continue;
    }
    ++reads;
    if (capacity == 0 || next[i] == kNever) continue;  // never used again: not worth a slot
    if (cached.size() >= capacity) {
      auto far = std::prev(cached.end());
      if (far->first <= next[i]) continue;  // everything cached is needed sooner: leave it out
      next_of.erase(far->second);
      cached.erase(far);
    }
    cached.insert({next[i], k});
    next_of[k] = next[i];
  }
  return reads;
}

CacheFloor cache_floor(std::span<const uint32_t> keys, uint64_t capacity, uint64_t split) {
  CacheFloor f;
  split = std::min<uint64_t>(split, keys.size());
  f.accesses = keys.size();
  f.min_all = min_reads(keys, capacity, false);
  f.min_before = min_reads(keys.first(size_t(split)), capacity, false);
  f.min_after = min_reads(keys.subspan(size_t(split)), capacity, true);
  // LRU: most recent at the front.
  std::list<uint32_t> order;
  std::unordered_map<uint32_t, std::list<uint32_t>::iterator> where;
  for (uint64_t i = 0; i < keys.size(); ++i) {
    const uint32_t k = keys[i];
    auto it = where.find(k);
    if (it != where.end()) {
      order.splice(order.begin(), order, it->second);
      continue;
    }
    ++(i < split ? f.lru_before : f.lru_after);
    if (capacity == 0) continue;
    if (order.size() >= capacity) {
      where.erase(order.back());
      order.pop_back();
    }
    order.push_front(k);
    where[k] = order.begin();
  }
  // The best fixed content for [split, end): the most accessed experts there.
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> count;  // key -> (accesses, first index)
  for (uint64_t i = split; i < keys.size(); ++i) {
    auto [it, fresh] = count.try_emplace(keys[i], 0, i);
    ++it->second.first;
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranked;  // (accesses, first index), most accessed first
  for (const auto& [k, c] : count) ranked.push_back(c);
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  f.static_after = keys.size() - split;
  for (size_t i = 0; i < ranked.size() && i < capacity; ++i) f.static_after -= ranked[i].first;
  f.distinct = std::unordered_set<uint32_t>(keys.begin(), keys.end()).size();
  return f;
}

}  // namespace sluice::bench
