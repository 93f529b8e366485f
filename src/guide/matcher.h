// Recognition of a Grammar over bytes and token terminals: a pushdown recognizer whose state is
// the set of stacks of grammar positions that the input so far can be in.
//
// Every stack's top is a terminal (a byte set or a token); rules are expanded top down as soon
// as a stack reaches them, so the set is exactly "what may come next". A frame whose rule has
// nothing left after the current element is dropped before the callee is pushed, so a
// right-recursive repetition like `x*` runs in constant stack depth. Identical stacks are merged
// and the set is kept in a canonical order, which lets token_mask.h cache states by value.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "guide/grammar.h"

namespace sluice::guide {

// More stacks than this at once means an ambiguous grammar blew up; the step throws.
constexpr size_t kMaxStacks = 4096;

// A recognizer state by value: words[0] is 1 when the input so far is a complete sentence, then
// each stack as its length followed by its positions, bottom to top, in canonical order.
struct MatcherState {
  std::vector<uint32_t> words{0};
  bool operator==(const MatcherState&) const = default;
};

namespace detail {

// Buffers reused across steps, so stepping does not allocate once they have grown.
struct StepScratch {
  std::vector<uint32_t> work, raw;
  std::vector<std::pair<uint32_t, uint32_t>> index;
  bool complete = false;
};

// The state before any input.
void initial_state(const Grammar& g, StepScratch& s, std::vector<uint32_t>& out);
// The state after one byte (or one token terminal) from state `in` (n words); false when no
// stack takes it, and then `out` is a dead state (no stacks, not complete).
bool step_byte(const Grammar& g, const uint32_t* in, size_t n, uint8_t byte, StepScratch& s, std::vector<uint32_t>& out);
bool step_token(const Grammar& g, const uint32_t* in, size_t n, int32_t token, StepScratch& s, std::vector<uint32_t>& out);
// a := the union of states a and b (both canonical).
void merge_states(std::vector<uint32_t>& a, const std::vector<uint32_t>& b, StepScratch& s);

}  // namespace detail

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Every accept_* is all or nothing: on false the state is unchanged.
  bool accept_byte(uint8_t b);
  bool accept_bytes(std::string_view bytes);
  bool accept_token_terminal(int32_t id);
  // A vocabulary token: its bytes (unless `special`; empty bytes never match) or a <[id]>
  // terminal, whichever the grammar allows (both: the union of the two states).
  bool accept_token(int32_t id, std::string_view bytes, bool special);

  // The input so far is a complete sentence of root.
  bool can_end() const { return state_.words[0] != 0; }
  // Complete, and nothing can extend it.
  bool finished() const { return can_end() && state_.words.size() == 1; }

  // Snapshots are plain values; copying the Matcher itself is just as cheap.
  const MatcherState& snapshot() const { return state_; }
  void restore(const MatcherState& s) { state_ = s; }

  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }
  size_t stacks() const;

 private:
  std::shared_ptr<const Grammar> grammar_;
  MatcherState state_;
};

}  // namespace sluice::guide
