// Progress bars: per-file and total lines, rate over this run's bytes, ETA from that rate.
#include "fetch/progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/error.h"

namespace sluice::fetch {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

namespace {

std::string bar(double frac, int width) {
  int full = int(frac * width + 0.5);
  std::string s = "[";
  for (int i = 0; i < width; ++i) s += i < full ? '#' : '.';
  return s + "]";
}

std::string eta(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--";
  char buf[32];
  long s = long(seconds);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
  return buf;
}

}  // namespace

Progress::Progress(std::string title, uint64_t total, bool quiet)
    : title_(std::move(title)), total_(total), quiet_(quiet), tty_(::isatty(2)), start_(std::chrono::steady_clock::now()) {
  if (quiet_) return;
  thread_ = std::thread([this] {
    int ticks = 0;
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      // A log file gets a line every 5 s; a terminal a redraw every 0.2 s.
      if (tty_ || ++ticks % 25 == 0) {
        std::lock_guard<std::mutex> lock(mu_);
        draw(false);
      }
    }
  });
}

Progress::~Progress() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (!quiet_) {
    std::lock_guard<std::mutex> lock(mu_);
    files_.clear();
    draw(true);
  }
}

void Progress::begin_file(const std::string& name, uint64_t size, uint64_t already) {
  std::lock_guard<std::mutex> lock(mu_);
  files_[name] = File{size, already};
  done_ += already;
}

void Progress::add(const std::string& name, uint64_t bytes) {
  done_ += bytes;
  fresh_ += bytes;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(name);
  if (it != files_.end()) it->second.done += bytes;
}

void Progress::end_file(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  files_.erase(name);
}

void Progress::message(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (tty_ && drawn_lines_) {
    std::fprintf(stderr, "\033[%dA\033[J", drawn_lines_);
    drawn_lines_ = 0;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

void Progress::draw(bool final) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = secs > 0 ? double(fresh_) / secs : 0;
  uint64_t done = done_;
  std::string out;
  if (tty_ && drawn_lines_) out += cat("\033[", drawn_lines_, "A\033[J");
  int lines = 0;
  if (tty_) {
    for (const auto& [name, f] : files_) {
      double frac = f.size ? double(f.done) / double(f.size) : 1.0;
      char line[256];
      std::snprintf(line, sizeof line, "  %-40.40s %s %5.1f%% %10s\n", name.c_str(), bar(frac, 20).c_str(), frac * 100,
                    human_bytes(double(f.size)).c_str());
      out += line;
      ++lines;
    }
  }
  double frac = total_ ? double(done) / double(total_) : 1.0;
  char line[256];
  std::snprintf(line, sizeof line, "%s %s %5.1f%% %s / %s  %s/s  ETA %s%s\n", title_.c_str(), bar(frac, 30).c_str(),
                frac * 100, human_bytes(double(done)).c_str(), human_bytes(double(total_)).c_str(),
                human_bytes(rate).c_str(), final ? "00:00" : eta(rate > 0 ? double(total_ - std::min(done, total_)) / rate : -1).c_str(),
                final ? cat("  (", human_bytes(double(fresh_)), " in ", int(secs), " s)").c_str() : "");
  out += line;
  ++lines;
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
  drawn_lines_ = tty_ && !final ? lines : 0;
}

}  // namespace sluice::fetch
