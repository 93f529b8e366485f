// The reads a cache cannot avoid: for the expert requests of a run (its router trace) and a
// cache of a given number of equal slots, how many experts any cache must read (Belady's MIN:
// evict, or never admit, the expert whose next use is furthest away; with equal sizes no policy
// reads fewer), and how many plain LRU reads. The bench reports bytes read / MIN bytes and an I/O
// floor from MIN next to the one from the bytes the run actually read.
#pragma once
#include <cstdint>
#include <span>

namespace sluice::bench {

struct CacheFloor {
  uint64_t accesses = 0, distinct = 0;
  // MIN over all accesses from an empty cache: no cold cache of this size reads less in the run.
  uint64_t min_all = 0;
  // MIN over accesses [0, split) from an empty cache: no cold cache of this size reads less.
  uint64_t min_before = 0;
  // MIN over accesses [split, end) from the best content a cache of this size could hold at
  // split (whatever came before): no cache of this size reads less there.
  uint64_t min_after = 0;
  // One LRU run over the whole sequence from empty, its reads before and after split.
  uint64_t lru_before = 0, lru_after = 0;
  // The reads of accesses [split, end) by a cache that holds one fixed set the whole time: the
  // `capacity` experts accessed most often there (ties to the first accessed), chosen knowing every
  // count in advance but not the order. When routes are independent draws (what a random router
  // gives; the bench's lag statistics say how close a trace is), no policy that does not know the
  // order expects fewer reads: it is the bound of a frequency cache, where MIN also knows the order.
  uint64_t static_after = 0;
};

// keys: the experts accessed, in order (a request's experts one after another); capacity: slots.
// Every access needs its expert in the cache or a read; MIN may leave an expert out of the cache
// after reading it (a bound no real cache beats), LRU always admits it.
CacheFloor cache_floor(std::span<const uint32_t> keys, uint64_t capacity, uint64_t split);

// MIN's reads for keys from an empty cache, or (free_start) from the best starting content: the
// `capacity` experts needed first.
uint64_t min_reads(std::span<const uint32_t> keys, uint64_t capacity, bool free_start);

}  // namespace sluice::bench
