// Download progress on stderr: one bar per active file plus a total with rate and ETA, redrawn
// in place on a terminal and printed every few seconds otherwise. Thread-safe.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace sluice::fetch {

class Progress {
 public:
  Progress(std::string title, uint64_t total_bytes, bool quiet = false);
  ~Progress();  // stops the drawing thread and prints the final line
  void begin_file(const std::string& name, uint64_t size, uint64_t already);
  void add(const std::string& name, uint64_t bytes);
  void end_file(const std::string& name);
  void message(const std::string& line);  // printed above the bars

 private:
  struct File {
    uint64_t size = 0, done = 0;
  };
  void draw(bool final);
  std::string title_;
  uint64_t total_;
  std::atomic<uint64_t> done_{0}, fresh_{0};  // fresh: bytes moved in this run (for the rate)
  bool quiet_, tty_;
  std::mutex mu_;
  std::map<std::string, File> files_;
  int drawn_lines_ = 0;
  std::chrono::steady_clock::time_point start_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string human_bytes(double bytes);

}  // namespace sluice::fetch
