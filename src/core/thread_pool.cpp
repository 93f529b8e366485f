// Thread pool: workers wait for a generation counter, each takes its own range, the caller runs
// range 0 and waits for the rest.
#include "core/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace sluice {

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
    stop_ = true;
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
    const RangeFn* job;
    std::pair<int64_t, int64_t> range;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      range = index < int(ranges_.size()) ? ranges_[index] : std::pair<int64_t, int64_t>{0, 0};
    }
    if (range.first < range.second) {
      try {
        (*job)(range.first, range.second);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::run(int64_t n, int64_t grain, RangeFn fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t chunks = std::min<int64_t>(size(), (n + grain - 1) / grain);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t c = 0; c < int64_t(ranges_.size()); ++c)
      ranges_[size_t(c)] = c < chunks ? std::pair<int64_t, int64_t>{n * c / chunks, n * (c + 1) / chunks}
                                      : std::pair<int64_t, int64_t>{0, 0};
    job_ = &fn;
    pending_ = int(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  cv_work_.notify_all();
  std::exception_ptr mine;
  try {
    fn(ranges_[0].first, ranges_[0].second);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [&] { return pending_ == 0; });
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

}  // namespace sluice
