// FIFO admission with a bounded line.
#include "serve/admission.h"

#include <algorithm>
#include <chrono>

namespace sluice::serve {

std::unique_ptr<Admission::Ticket> Admission::try_enter() {
  std::lock_guard<std::mutex> lock(mu_);
  if (line_.size() + (running_ ? 1 : 0) >= queue_ + 1) return nullptr;
  uint64_t n = next_number_++;
  line_.push_back(n);
  return std::make_unique<Ticket>(*this, n);
}

size_t Admission::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return line_.size();
}

bool Admission::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

bool Admission::Ticket::wait_turn(const std::function<bool()>& give_up, int poll_ms) {
  std::unique_lock<std::mutex> lock(a_.mu_);
  while (a_.running_ || a_.line_.front() != number_) {
    a_.cv_.wait_for(lock, std::chrono::milliseconds(poll_ms));
    if (a_.running_ || a_.line_.front() != number_) {
      lock.unlock();
      bool stop = give_up && give_up();
      lock.lock();
      if (stop) return false;  // the destructor takes it out of the line
    }
  }
  a_.line_.pop_front();
  a_.running_ = true;
  running_ = true;
  return true;
}

Admission::Ticket::~Ticket() {
  {
    std::lock_guard<std::mutex> lock(a_.mu_);
    if (running_) {
      a_.running_ = false;
    } else {
      auto it = std::find(a_.line_.begin(), a_.line_.end(), number_);
      if (it != a_.line_.end()) a_.line_.erase(it);
    }
  }
  a_.cv_.notify_all();
}

}  // namespace sluice::serve
