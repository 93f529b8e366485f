// The progress lines of progress_line.h.
#include "cli/progress_line.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace sluice::cli {

ProgressLine::ProgressLine(std::string prefix)
    : prefix_(std::move(prefix)), tty_(::isatty(2)) {}

void ProgressLine::update(uint64_t done, uint64_t total, const std::string& what) {
  if (finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (start_ == std::chrono::steady_clock::time_point{}) start_ = now;
  const bool last = done >= total;
  const int64_t tenth = total > 0 ? int64_t(done * 10 / total) : 10;
  if (!last && (tty_ ? now - last_draw_ < std::chrono::milliseconds(100) : tenth == last_tenth_)) return;
  last_draw_ = now;
  last_tenth_ = tenth;
  finished_ = last;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::string line = prefix_ + ": ";
  char buf[96];
  std::snprintf(buf, sizeof buf, "%5.1f%%  %9.1f / %.1f MB", total ? 100.0 * double(done) / double(total) : 100.0,
                double(done) / 1e6, double(total) / 1e6);
  line += buf;
  if (seconds >= 0.5) {
    std::snprintf(buf, sizeof buf, ", %.0f MB/s", double(done) / 1e6 / seconds);
    line += buf;
  }
  if (!what.empty() && !last) line += "  " + what;
  if (tty_) std::fprintf(stderr, "\r%-100s%s", line.c_str(), last ? "\n" : "");
  else std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace sluice::cli
