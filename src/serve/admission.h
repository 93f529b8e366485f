// Admission of generation requests: one generation runs at a time, at most `queue` more wait in
// arrival order, and anything beyond that is refused at once (the server answers 429). A waiter
// can give up (its client disconnected, or the server is shutting down).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace sluice::serve {

class Admission {
 public:
  explicit Admission(size_t queue) : queue_(queue) {}

  // Holds a place (waiting or running); releases it when destroyed.
  class Ticket {
   public:
    Ticket(Admission& a, uint64_t number) : a_(a), number_(number) {}
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    // Blocks until it is this ticket's turn (true) or `give_up` says to stop waiting (false);
    // give_up is polled every `poll_ms`.
    bool wait_turn(const std::function<bool()>& give_up, int poll_ms = 50);

   private:
    Admission& a_;
    uint64_t number_;
    bool running_ = false;
  };

  // A ticket, or nullptr when one is running and `queue` are already waiting.
  std::unique_ptr<Ticket> try_enter();
  size_t waiting() const;
  bool busy() const;

 private:
  friend class Ticket;
  size_t queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_number_ = 0;
  std::deque<uint64_t> line_;  // waiting tickets in arrival order
  bool running_ = false;
};

}  // namespace sluice::serve
