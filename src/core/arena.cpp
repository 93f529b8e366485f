// Aligned allocation with first-touch at allocation time.
#include "core/arena.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace sluice {

void AlignedFree::operator()(void* p) const { std::free(p); }

namespace {
std::atomic<uint64_t> g_touched{0};
}  // namespace

uint64_t touched_allocations() { return g_touched.load(); }

std::unique_ptr<std::byte[], AlignedFree> allocate_touched(size_t bytes, size_t alignment) {
  g_touched.fetch_add(1, std::memory_order_relaxed);
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded == 0) rounded = alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, rounded);
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
