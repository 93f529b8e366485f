// Prefill progress: a drawing thread per prefill, woken every kRedrawEvery.
#include "cli/prefill_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "core/error.h"

namespace sluice::cli {
namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string duration_text(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const long t = long(s + 0.5);
  if (t >= 3600) return cat(t / 3600, " h ", t / 60 % 60, " min");
  if (t >= 60) return cat(t / 60, " min ", t % 60, " s");
  return cat(t, " s");
}

}  // namespace

PrefillProgress::PrefillProgress(bool enabled) : enabled_(enabled), tty_(enabled && ::isatty(2)) {}

PrefillProgress::~PrefillProgress() { finish(); }

void PrefillProgress::update(int64_t done, int64_t total) {
  if (!enabled_) return;
  if (done == 0) {
    finish();
    std::lock_guard<std::mutex> lock(mu_);
    total_ = total;
    done_ = 0;
    done_at_last_advance_ = 0;
    start_ = last_advance_ = last_line_ = clock::now();
    shown_ = false;
    running_ = true;
    thread_ = std::thread([this] { draw_loop(); });
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = done;
  done_at_last_advance_ = done;
  last_advance_ = clock::now();
}

void PrefillProgress::finish() {
  if (!enabled_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    running_ = false;
  }
  wake_.notify_one();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (shown_) draw(true);
}

void PrefillProgress::draw_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (running_) {
    wake_.wait_for(lock, kRedrawEvery, [&] { return !running_; });
    if (!running_) break;
    const auto now = clock::now();
    if (now - start_ < kShowAfter) continue;
    if (!tty_ && shown_ && now - last_line_ < kLineEvery) continue;
    draw(false);
    last_line_ = now;
    shown_ = true;
  }
}

// Called with mu_ held.
void PrefillProgress::draw(bool final) {
  const auto now = clock::now();
  const int64_t done = done_;
  const double elapsed = seconds(now - start_);
  if (final) {
    if (tty_) {
      std::fputs("\r\033[K", stderr);
    } else {
      std::fprintf(stderr, "sluice: prefill %lld/%lld tokens in %.1f s (%.0f tok/s)\n", (long long)done,
                   (long long)total_, elapsed, elapsed > 0 ? double(done) / elapsed : 0.0);
    }
    std::fflush(stderr);
    return;
  }
  // The rate of the passes finished so far; before the first one ends only the time is known.
  const double measured = seconds(last_advance_ - start_);
  const double rate = done_at_last_advance_ > 0 && measured > 0 ? double(done_at_last_advance_) / measured : 0.0;
  std::string text = cat("prefill ", done, "/", total_, " tokens");
  if (total_ > 0) text += cat(" (", int(100.0 * double(done) / double(total_)), "%)");
  char rate_text[64] = "";
  if (rate > 0) {
    std::snprintf(rate_text, sizeof rate_text, ", %.0f tok/s", rate);
    text += rate_text;
    text += ", ETA " + duration_text(std::max(0.0, double(total_ - done) / rate - seconds(now - last_advance_)));
  }
  text += ", " + duration_text(elapsed) + " so far";
  if (tty_)
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
  else
    std::fprintf(stderr, "sluice: %s\n", text.c_str());
  std::fflush(stderr);
}

}  // namespace sluice::cli
