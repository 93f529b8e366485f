// Aligned allocation with first-touch at allocation time.
#include "core/arena.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include <sys/mman.h>

#include "core/thread_pool.h"

namespace sluice {

void AlignedFree::operator()(void* p) const { std::free(p); }

namespace {
std::atomic<uint64_t> g_touched{0};
}  // namespace

uint64_t touched_allocations() { return g_touched.load(); }

std::unique_ptr<std::byte[], AlignedFree> allocate_touched(size_t bytes, size_t alignment, bool split, Pages pages) {
  g_touched.fetch_add(1, std::memory_order_relaxed);
  if (pages == Pages::Huge) alignment = std::max(alignment, kHugePage);
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded == 0) rounded = alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (!p) throw std::bad_alloc();
  // Advice only: where the kernel has no huge page to give (THP off, memory fragmented) the
  // buffer is in 4 KiB pages, as it would be without it.
  if (pages == Pages::Huge) (void)madvise(p, rounded, MADV_HUGEPAGE);
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

size_t huge_page_bytes_in(std::istream& smaps, uintptr_t lo, uintptr_t hi) {
  std::string line;
  size_t total = 0;
  bool inside = false;
  while (std::getline(smaps, line)) {
    unsigned long long a = 0, b = 0;
    char dash = 0;
    // A mapping's first line is "start-end perms ..." in hex; its fields are "Name:   N kB".
    if (std::sscanf(line.c_str(), "%llx%c%llx", &a, &dash, &b) == 3 && dash == '-') {
      inside = a < hi && b > lo;
      continue;
    }
    unsigned long long kb = 0;
    if (inside && std::sscanf(line.c_str(), "AnonHugePages: %llu kB", &kb) == 1) total += size_t(kb) * 1024;
  }
  return std::min<size_t>(total, hi - lo);
}

size_t huge_page_bytes(const void* p, size_t bytes) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  return smaps ? huge_page_bytes_in(smaps, lo, lo + bytes) : 0;
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
