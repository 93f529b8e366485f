// A fixed pool of worker threads (one per core by default) with a blocking parallel_for. One thread
// calls parallel_for at a time (the engine's), and not from inside a range.
// Work is split into contiguous index ranges; callers make each index's result independent of
// the split so that results do not depend on the thread count.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace sluice {

// A non-owning reference to a callable taking a range (a std::function would allocate for most
// lambdas, and parallel_for runs in the per-token path).
class RangeFn {
 public:
  template <typename F>
  explicit RangeFn(F& f) : obj_(&f), call_([](void* o, int64_t a, int64_t b) { (*static_cast<F*>(o))(a, b); }) {}
  void operator()(int64_t a, int64_t b) const { call_(obj_, a, b); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  explicit ThreadPool(int threads = 0);  // 0 = hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Runs fn(begin, end) over [0, n) split into at most size() chunks of at least `grain` items;
  // the calling thread takes part. Exceptions from fn are rethrown here. Allocates nothing.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    run(n, grain, RangeFn(fn));
  }

  // The process-wide pool used by kernels and the model.
  static ThreadPool& global();

 private:
  void worker_loop(int index);
  void run(int64_t n, int64_t grain, RangeFn fn);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  // Written by run() before it publishes a generation; read by the workers after they see it.
  const RangeFn* job_ = nullptr;
  std::vector<std::pair<int64_t, int64_t>> ranges_;  // one per thread, sized at construction
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};      // workers still running the current generation
  std::atomic<int> sleepers_{0};     // workers parked on cv_work_
  std::atomic<bool> caller_parked_{false};
  std::atomic<bool> stop_{false};
  std::exception_ptr error_;  // set by workers under mu_; read by run() once pending_ is 0
};

}  // namespace sluice
