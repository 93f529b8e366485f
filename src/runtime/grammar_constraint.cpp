#include "runtime/grammar_constraint.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace sluice::runtime {

std::shared_ptr<const guide::Vocabulary> guide_vocabulary(const tokenizer::Tokenizer& tok, int64_t vocab_size) {
  // The model's vocabulary may be padded past the tokenizer's: those ids have no bytes.
  const int32_t n = int32_t(std::max<int64_t>(vocab_size, tok.vocab_size()));
  std::vector<std::string_view> bytes(static_cast<size_t>(n));
  std::vector<bool> special(static_cast<size_t>(n), false);
  for (int32_t id = 0; id < std::min<int32_t>(n, tok.vocab_size()); ++id) {
    special[size_t(id)] = tok.is_special(id);
    if (!special[size_t(id)]) bytes[size_t(id)] = tok.token_bytes(id);
  }
  return std::make_shared<const guide::Vocabulary>(bytes, special);
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const guide::Vocabulary> vocab,
                                     std::shared_ptr<const guide::Grammar> grammar, std::vector<int32_t> eos_ids,
                                     int32_t starts_after, int mask_parts, size_t shared_walk_nodes)
    : vocab_(std::move(vocab)),
      matcher_(std::move(grammar)),
      mask_parts_(mask_parts > 0 ? mask_parts : guide::default_mask_parts(vocab_->nodes())),
      shared_walk_nodes_(shared_walk_nodes),
      eos_(std::move(eos_ids)),
      starts_after_(starts_after),
      active_(starts_after < 0) {
  SLUICE_CHECK(!eos_.empty(), "guided decoding needs the model's end-of-sequence token (config.json eos_token_id)");
}

bool GrammarConstraint::is_eos(int32_t t) const { return std::find(eos_.begin(), eos_.end(), t) != eos_.end(); }

namespace {
using Clock = std::chrono::steady_clock;
// Adds the time since construction to *total.
struct Timed {
  explicit Timed(double* total) : total_(total) {}
  ~Timed() { *total_ += std::chrono::duration<double>(Clock::now() - start_).count(); }
  double* total_;
  Clock::time_point start_ = Clock::now();
};
}  // namespace

GrammarConstraint::~GrammarConstraint() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void GrammarConstraint::join() const {
  if (!worker_.joinable()) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !job_; });
}

void GrammarConstraint::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return job_ || stop_; });
    if (stop_) return;
    lock.unlock();
    compute(ahead_, true);  // the caller waits in join() before it touches the matcher or ahead_
    lock.lock();
    job_ = false;
    cv_.notify_all();
  }
}

void GrammarConstraint::prepare() {
  join();
  ahead_.resize(size_t((vocab_->size() + 63) / 64));  // allocates at the first call only
  ahead_ready_ = true;
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = true;
  }
  cv_.notify_all();
}

void GrammarConstraint::allowed(std::vector<uint64_t>& bits) {
  Timed t(&wait_s_);
  join();
  if (ahead_ready_ && ahead_.size() == bits.size()) {
    bits = ahead_;
    ahead_ready_ = false;
    return;
  }
  compute(bits, false);
}

void GrammarConstraint::compute(std::vector<uint64_t>& bits, bool share) {
  ++masks_computed_;
  auto set = [&](int32_t t) {
    if (t >= 0 && size_t(t >> 6) < bits.size()) bits[size_t(t >> 6)] |= uint64_t(1) << (t & 63);
  };
  if (ended_) {  // nothing follows the end; keep the end so a caller always has a token
    std::fill(bits.begin(), bits.end(), 0);
    for (int32_t e : eos_) set(e);
    return;
  }
  if (active_) {
    if (!masks_) masks_ = std::make_unique<guide::ParallelMasks>(vocab_, mask_parts_, shared_walk_nodes_);
    masks_->allowed(matcher_, bits, share);
  }
  else std::fill(bits.begin(), bits.end(), ~uint64_t(0));  // free reasoning: anything but an end
  // An end token is allowed exactly where the grammar's sentence is complete (never in reasoning),
  // whatever the grammar says of it.
  for (int32_t e : eos_) {
    if (e >= 0 && size_t(e >> 6) < bits.size()) bits[size_t(e >> 6)] &= ~(uint64_t(1) << (e & 63));
    if (active_ && matcher_.can_end()) set(e);
  }
}

bool GrammarConstraint::allows(int32_t t) {
  Timed timed(&wait_s_);
  join();
  if (ended_) return is_eos(t);
  if (is_eos(t)) return active_ && matcher_.can_end();
  if (!active_) return true;
  return vocab_->allows(matcher_, t);
}

void GrammarConstraint::accept(int32_t t) {
  Timed timed(&wait_s_);
  join();
  ahead_ready_ = false;  // the position moves
  bool ok = true;
  if (ended_ || is_eos(t)) {
    ok = is_eos(t) && (ended_ || (active_ && matcher_.can_end()));
    ended_ = true;
  } else if (!active_) {
    active_ = t == starts_after_;
  } else {
    ok = vocab_->accept(matcher_, t);  // one walk of the token's bytes: the check and the step
  }
  SLUICE_CHECK(ok, "guided decoding: token ", t, " is not allowed here");
}

void GrammarConstraint::save() {
  join();
  saved_ = matcher_.snapshot();
  saved_active_ = active_;
  saved_ended_ = ended_;
}

void GrammarConstraint::restore() {
  join();
  ahead_ready_ = false;
  matcher_.restore(saved_);
  active_ = saved_active_;
  ended_ = saved_ended_;
}

}  // namespace sluice::runtime
