// Aligned, pre-touched buffers. Fresh memory is slow on first touch on these machines, so arenas
// are allocated and touched once at load and reused; nothing in the per-token path allocates.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace sluice {

struct AlignedFree {
  void operator()(void* p) const;
};

// Allocates `bytes` aligned to `alignment` (a power of two, >= 64) and writes every page once.
// split: a large buffer's pages are written by every thread of the global pool (the first pass of
// a long prompt grows the device's scratch arena by hundreds of MB, page faults one thread took
// alone); only from a thread that may call ThreadPool::parallel_for (not inside a range).
std::unique_ptr<std::byte[], AlignedFree> allocate_touched(size_t bytes, size_t alignment = 64, bool split = false);
// How many allocate_touched calls the process has made (tests check that a pass makes none).
uint64_t touched_allocations();

// A growable fp32 scratch vector with 64-byte alignment that keeps its capacity across uses.
class FloatBuffer {
 public:
  float* resize(size_t n);  // grows only; contents are unspecified after growth
  float* data() { return reinterpret_cast<float*>(mem_.get()); }
  const float* data() const { return reinterpret_cast<const float*>(mem_.get()); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<std::byte[], AlignedFree> mem_;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace sluice
