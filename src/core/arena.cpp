// Aligned allocation with first-touch at allocation time.
#include "core/arena.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/thread_pool.h"

namespace sluice {

void AlignedFree::operator()(void* p) const { std::free(p); }

namespace {
std::atomic<uint64_t> g_touched{0};
}  // namespace

uint64_t touched_allocations() { return g_touched.load(); }

std::unique_ptr<std::byte[], AlignedFree> allocate_touched(size_t bytes, size_t alignment, bool split) {
  g_touched.fetch_add(1, std::memory_order_relaxed);
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded == 0) rounded = alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (!p) throw std::bad_alloc();
  constexpr size_t kSplitBytes = size_t(16) << 20, kSlice = size_t(2) << 20;
  if (split && rounded >= kSplitBytes) {
    std::byte* b = static_cast<std::byte*>(p);
    const int64_t slices = int64_t((rounded + kSlice - 1) / kSlice);
    ThreadPool::global().parallel_for(slices, 1, [&](int64_t s0, int64_t s1) {
      const size_t from = size_t(s0) * kSlice, to = std::min(rounded, size_t(s1) * kSlice);
      std::memset(b + from, 0, to - from);
    });
  } else {
    std::memset(p, 0, rounded);
  }
  return std::unique_ptr<std::byte[], AlignedFree>(static_cast<std::byte*>(p));
}

float* FloatBuffer::resize(size_t n) {
  if (n > capacity_) {
    size_t cap = n + n / 2 + 16;
    mem_ = allocate_touched(cap * sizeof(float));
    capacity_ = cap;
  }
  size_ = n;
  return data();
}

}  // namespace sluice
