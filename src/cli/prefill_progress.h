// Progress of a long prefill on stderr: prompt tokens fed, rate, ETA and time so far. Nothing for
// a prefill shorter than kShowAfter; after that a line redrawn in place when stderr is a terminal,
// cleared before the reply starts, or a plain line every kLineEvery when it is not (a log file
// gets no carriage returns), with a last line giving the prefill's total time and rate. The
// generation loop reports after each prefill pass; a drawing thread keeps the elapsed time moving
// while one long pass runs.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace sluice::cli {

class PrefillProgress {
 public:
  static constexpr std::chrono::milliseconds kShowAfter{1000};
  static constexpr std::chrono::milliseconds kRedrawEvery{250};
  static constexpr std::chrono::milliseconds kLineEvery{5000};

  // enabled false: every call does nothing.
  explicit PrefillProgress(bool enabled);
  ~PrefillProgress();
  PrefillProgress(const PrefillProgress&) = delete;
  PrefillProgress& operator=(const PrefillProgress&) = delete;

  // The generation loop's on_prefill: (0, total) starts the clock, later calls move `done`.
  void update(int64_t done, int64_t total);
  // The prefill is over (the first token is out, or it was cancelled): clears the bar or prints
  // the last line. Idempotent; a later update(0, n) starts another prefill.
  void finish();

 private:
  void draw_loop();
  void draw(bool final);
  const bool enabled_, tty_;
  std::atomic<int64_t> done_{0};
  int64_t total_ = 0;
  std::chrono::steady_clock::time_point start_, last_advance_, last_line_;
  int64_t done_at_last_advance_ = 0;
  bool shown_ = false;  // something was drawn for this prefill
  std::mutex mu_;
  std::condition_variable wake_;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace sluice::cli
