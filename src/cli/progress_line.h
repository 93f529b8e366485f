// Progress of a long write (make-tiny, prepare) on stderr: on a terminal one line redrawn in place
// at most ten times a second; otherwise (a log file, CI) a plain line at every tenth of the work, so
// a log gets about a dozen lines instead of a carriage return per chunk. Every line gives the bytes
// so far and the rate; the last one ends with a newline.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace sluice::cli {

class ProgressLine {
 public:
  explicit ProgressLine(std::string prefix);
  // `what` (optional) names the current part ("layer 12"), shown on terminals and in plain lines.
  void update(uint64_t done, uint64_t total, const std::string& what = "");

 private:
  const std::string prefix_;
  const bool tty_;
  std::chrono::steady_clock::time_point start_{};  // the first update's time: the rate counts from it
  std::chrono::steady_clock::time_point last_draw_{};
  int64_t last_tenth_ = -1;
  bool finished_ = false;
};

}  // namespace sluice::cli
