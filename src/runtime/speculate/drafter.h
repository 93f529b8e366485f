// Drafters propose tokens; the target verifies every one. A drafter sees the committed history
// (prompt + accepted tokens, ending with the pending token the target has not consumed yet) and
// returns up to `max_tokens` guesses of what follows. It is told what was accepted so that a
// drafter with its own state can keep it in step.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace sluice::runtime {

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual const char* name() const = 0;
  virtual std::vector<int32_t> propose(std::span<const int32_t> history, int max_tokens) = 0;
  // The target accepted `accepted` tokens of the last proposal (history has grown accordingly).
  virtual void observe(int /*proposed*/, int /*accepted*/) {}
  // Brings a drafter's own state up to `history` (after the prompt's prefill, and before a step
  // that drafts after a pause). The loop times it apart from the step: catching up is one-off
  // work, and counting it would make the first drafted step after a pause look slow to the
  // controller, which would then keep a good drafter off.
  virtual void catch_up(std::span<const int32_t> /*history*/) {}

  // A drafter conditioned on the target's hidden rows (DSpark) names the zero-based target layers
  // whose output rows it needs; the generation loop then captures them in every pass and hands
  // over the rows of committed positions only. nullptr: none wanted (no capture, no cost).
  virtual const std::vector<int64_t>* wants_hidden() const { return nullptr; }
  // Rows [n, layers · hidden] of target positions first..first+n-1, just committed. `first` is
  // below what the drafter has seen when the target state was reset or rolled back.
  virtual void on_committed_rows(const float* /*rows*/, int64_t /*n*/, int64_t /*first*/) {}
};

// Prompt lookup: finds the longest recent earlier occurrence (n = max_n..min_n tokens) of the
// history's suffix and proposes the tokens that followed it.
class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int min_n = 2, int max_n = 6, size_t window = 4096) : min_n_(min_n), max_n_(max_n), window_(window) {}
  const char* name() const override { return "ngram"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int max_tokens) override;

 private:
  int min_n_, max_n_;
  size_t window_;
};

}  // namespace sluice::runtime
