// ThreadPool: every index runs exactly once whatever the thread count and grain, the caller sees
// the workers' plain (non-atomic) writes once parallel_for returns, and an exception thrown in a
// range is rethrown to the caller with the pool still usable. Run under ThreadSanitizer too
// (make test-tsan), which checks the hand-off between the caller and the workers.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/thread_pool.h"

namespace sluice {
namespace {

TEST(ThreadPool, EveryIndexRunsExactlyOnceForAnySplit) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 7, 1000}) {
      for (int64_t grain : {1, 3, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, grain, [&](int64_t a, int64_t b) {
          ASSERT_LE(0, a);
          ASSERT_LE(a, b);
          ASSERT_LE(b, n);
          for (int64_t i = a; i < b; ++i) hits[size_t(i)].fetch_add(1, std::memory_order_relaxed);
        });
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(hits[size_t(i)].load(), 1) << "threads " << threads << " n " << n << " grain " << grain << " i " << i;
      }
    }
  }
}

// A parallel_for called from inside a range (the device's scratch arena touching a new chunk, say)
// runs inline on that thread: every inner index once, no deadlock, on the caller's range and the
// workers' alike.
TEST(ThreadPool, ParallelForInsideARangeRunsInline) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(6 * 100);
  pool.parallel_for(6, 1, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i)
      pool.parallel_for(100, 1, [&](int64_t c, int64_t d) {
        for (int64_t j = c; j < d; ++j) hits[size_t(i * 100 + j)].fetch_add(1, std::memory_order_relaxed);
      });
  });
  for (size_t k = 0; k < hits.size(); ++k) ASSERT_EQ(hits[k].load(), 1) << k;
  // And the pool splits again at the top level afterwards.
  std::atomic<int> ranges{0};
  pool.parallel_for(300, 1, [&](int64_t, int64_t) { ranges.fetch_add(1); });
  EXPECT_EQ(ranges.load(), 3);
}

TEST(ThreadPool, CallerSeesWorkerWritesAfterEachCall) {
  ThreadPool pool(4);
  std::vector<int64_t> slots(256, 0);  // plain ints: parallel_for's return must order the writes
  for (int64_t round = 1; round <= 300; ++round) {
    pool.parallel_for(int64_t(slots.size()), 1, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) slots[size_t(i)] += i * round;
    });
    int64_t sum = 0;
    for (int64_t v : slots) sum += v;
    // sum over rounds 1..round of round * (0 + 1 + ... + 255)
    ASSERT_EQ(sum, 255 * 256 / 2 * (round * (round + 1) / 2));
  }
}

TEST(ThreadPool, ExceptionInARangeReachesTheCallerAndThePoolStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(300, 1,
                                 [&](int64_t a, int64_t b) {
                                   for (int64_t i = a; i < b; ++i)
                                     if (i == 250) throw std::runtime_error("index 250");
                                 }),
               std::runtime_error);
  std::atomic<int64_t> total{0};
  pool.parallel_for(300, 1, [&](int64_t a, int64_t b) { total += b - a; });
  EXPECT_EQ(total.load(), 300);
}

}  // namespace
}  // namespace sluice
