// Aligned, pre-touched buffers. Fresh memory is slow on first touch on these machines, so arenas
// are allocated and touched once at load and reused; nothing in the per-token path allocates.
#pragma once
#include <cstddef>
#include <cstdint>
#include <istream>
#include <memory>
#include <vector>

namespace sluice {

struct AlignedFree {
  void operator()(void* p) const;
};

// Which pages back a buffer. Huge: 2 MiB-aligned and advised for transparent huge pages
// (MADV_HUGEPAGE; the kernel falls back to 4 KiB pages where it has none or THP is off). Only
// kernels_bench asks for them (SLUICE_BENCH_PAGES=huge), to measure what TLB misses cost a GEMV
// (the GEMVs run faster in them). The engine keeps 4 KiB pages: faulting huge pages in is
// several times slower (memory compaction), a long prefill with its scratch in them was slower,
// and streamed decode with its expert cache in them was no faster. Figures in
// docs/BENCHMARKS.md, "Design measurements behind code comments".
enum class Pages { Small, Huge };
inline constexpr size_t kHugePage = size_t(2) << 20;

// Allocates `bytes` aligned to `alignment` (a power of two, >= 64) and writes every page once.
// split: a large buffer's pages are written by every thread of the global pool (the first pass of
// a long prompt grows the device's scratch arena by hundreds of MB, page faults one thread took
// alone); only from a thread that may call ThreadPool::parallel_for (not inside a range).
std::unique_ptr<std::byte[], AlignedFree> allocate_touched(size_t bytes, size_t alignment = 64, bool split = false,
                                                           Pages pages = Pages::Small);
// How many of the `bytes` at p sit in transparent huge pages (the AnonHugePages of the mappings
// that hold them, from /proc/self/smaps), for reports; 0 where that cannot be read.
size_t huge_page_bytes(const void* p, size_t bytes);
// The same from smaps text, for [lo, hi): the AnonHugePages of every mapping that overlaps it,
// capped at hi - lo (a mapping may reach past the range).
size_t huge_page_bytes_in(std::istream& smaps, uintptr_t lo, uintptr_t hi);
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
