// Thread pool: workers wait for a generation counter, each takes its own range, the caller runs
// range 0 and waits for the rest.
//
// Waiting spins first, then blocks. A decode step is a few hundred short parallel ops back to back
// (at K3-scaled widths many take tens of microseconds), and waking a worker parked on a futex costs
// a context switch on each side: a profile of a 2-thread decode found a large share of it in the
// scheduler (docs/BENCHMARKS.md, "Design measurements behind code comments").
// So a worker that finished a range polls the generation for up to kSpin before it parks on the
// condition variable, and the caller polls the pending count likewise before it parks. Whoever
// publishes (a new generation, the last range done) notifies only when the other side announced that it
// parks (sleepers_, caller_parked_; sequentially consistent, see worker_loop and run), so the common
// case takes no lock at all.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SLUICE_CPU_RELAX() _mm_pause()
#else
#define SLUICE_CPU_RELAX() std::this_thread::yield()
#endif

namespace sluice {

namespace {

// Set while this thread runs a range of a parallel_for: one called from there runs inline (the
// pool's workers are all busy with the outer one).
thread_local bool t_in_range = false;

// How long a waiter polls before it parks: longer than the gap between two ops of a decode step,
// short enough that an idle pool stops using its cores at once.
constexpr auto kSpin = std::chrono::microseconds(100);

// Polls `done` until it holds or kSpin has passed; whether it held.
template <typename Done>
bool spin_until(Done done) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    if (done()) return true;
    SLUICE_CPU_RELAX();
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start > kSpin) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) {
    const char* env = std::getenv("SLUICE_THREADS");
    threads = env ? std::atoi(env) : int(std::thread::hardware_concurrency());
    if (threads <= 0) threads = 1;
  }
  ranges_.assign(size_t(threads), {0, 0});
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // A new generation (or stop), by polling, else parked. Parking announces itself in sleepers_
    // before the predicate is checked under the mutex; run() bumps the generation before it reads
    // sleepers_ (both seq_cst), so either run() sees the sleeper and notifies under the mutex, or
    // this check sees the new generation.
    auto ready = [&] { return stop_.load() || generation_.load() != seen; };
    if (!spin_until(ready)) {
      std::unique_lock<std::mutex> lock(mu_);
      sleepers_.fetch_add(1);
      cv_work_.wait(lock, ready);
      sleepers_.fetch_sub(1);
    }
    if (stop_.load()) return;
    seen = generation_.load();
    const RangeFn* job = job_;
    const std::pair<int64_t, int64_t> range =
        index < int(ranges_.size()) ? ranges_[size_t(index)] : std::pair<int64_t, int64_t>{0, 0};
    if (range.first < range.second) {
      t_in_range = true;
      try {
        (*job)(range.first, range.second);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      t_in_range = false;
    }
    // The last range done wakes a parked caller (same protocol, caller_parked_ for sleepers_).
    if (pending_.fetch_sub(1) == 1 && caller_parked_.load()) {
      std::lock_guard<std::mutex> lock(mu_);
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (chunks <= 1 || t_in_range) {  // a parallel_for from inside a range runs inline
    fn(0, n);
    return;
  }
  // Workers read job_, ranges_ and error_ only after they see the new generation (seq_cst store
  // and load), and this thread reads them again only after pending_ reaches 0.
  for (int64_t c = 0; c < int64_t(ranges_.size()); ++c)
    ranges_[size_t(c)] = c < chunks ? std::pair<int64_t, int64_t>{n * c / chunks, n * (c + 1) / chunks}
                                    : std::pair<int64_t, int64_t>{0, 0};
  job_ = &fn;
  error_ = nullptr;
  pending_.store(int(workers_.size()));
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    cv_work_.notify_all();
  }
  std::exception_ptr mine;
  t_in_range = true;
  try {
    fn(ranges_[0].first, ranges_[0].second);
  } catch (...) {
    mine = std::current_exception();
  }
  t_in_range = false;
  auto done = [&] { return pending_.load() == 0; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    caller_parked_.store(true);
    cv_done_.wait(lock, done);
    caller_parked_.store(false);
  }
  if (mine) std::rethrow_exception(mine);
  // A worker sets error_ (under mu_, against the other workers) before its pending_ decrement,
  // which this thread has seen reach 0: no lock is needed to read it.
  if (error_) std::rethrow_exception(error_);
}

}  // namespace sluice
