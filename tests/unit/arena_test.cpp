// core/arena: pre-touched buffers, their page size, and the smaps reading behind kernels_bench's
// huge-page line.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "core/arena.h"

namespace {

TEST(Arena, HugeBuffersAre2MiBAlignedAndZeroed) {
  const size_t bytes = 3 * sluice::kHugePage + 123;
  auto b = sluice::allocate_touched(bytes, 64, false, sluice::Pages::Huge);
  ASSERT_TRUE(b);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % sluice::kHugePage, 0u);
  EXPECT_TRUE(std::all_of(b.get(), b.get() + bytes, [](std::byte x) { return x == std::byte{0}; }));
  // Granted or not (THP may be off), never more than the buffer.
  EXPECT_LE(sluice::huge_page_bytes(b.get(), bytes), bytes);
  auto small = sluice::allocate_touched(4096, 4096, false, sluice::Pages::Small);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.get()) % 4096, 0u);
}

TEST(Arena, HugePageBytesSumsTheMappingsThatOverlapTheRange) {
  const std::string smaps =
      "7f0000000000-7f0000400000 rw-p 00000000 00:00 0\n"
      "Size:               4096 kB\n"
      "AnonHugePages:      4096 kB\n"
      "7f0000400000-7f0000800000 rw-p 00000000 00:00 0 \n"
      "AnonHugePages:      2048 kB\n"
      "7f0000800000-7f0000c00000 rw-p 00000000 00:00 0\n"
      "AnonHugePages:      4096 kB\n"
      "VmFlags: rd wr mr mw me ac hg\n";
  auto in = [&](uintptr_t lo, uintptr_t hi) {
    std::istringstream s(smaps);
    return sluice::huge_page_bytes_in(s, lo, hi);
  };
  // The second mapping alone, then the first two (a range ending where the third starts).
  EXPECT_EQ(in(0x7f0000400000, 0x7f0000800000), size_t(2048) << 10);
  EXPECT_EQ(in(0x7f0000100000, 0x7f0000800000), size_t(6144) << 10);
  // Capped at the range: 1 MiB inside a mapping with 4 MiB of huge pages.
  EXPECT_EQ(in(0x7f0000800000, 0x7f0000900000), size_t(1) << 20);
  EXPECT_EQ(in(0x7e0000000000, 0x7e0000100000), 0u);
  std::istringstream empty("");
  EXPECT_EQ(sluice::huge_page_bytes_in(empty, 0, 4096), 0u);
}

}  // namespace
