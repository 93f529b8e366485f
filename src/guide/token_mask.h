// Token masks: which vocabulary tokens a Matcher allows next, exactly. Token t is allowed when
// its bytes are accepted from the matcher's state (ordinary tokens with bytes) or when the grammar
// expects the terminal <[t]> there (any token; the only way for special tokens).
//
// The vocabulary's byte strings are kept as a trie laid out in preorder, so one linear pass visits
// every shared prefix once and skips a whole subtree as soon as its first byte is rejected. The
// recognizer's states along the way are interned, and the transition (state, byte) -> state is
// memoized in a MaskCache: inside JSON string contents almost every byte leads back to the same
// state, so most trie nodes cost one table lookup rather than a recognizer step.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "guide/matcher.h"

namespace sluice::guide {

// The part of a grammar's byte-level automaton learnt so far: interned recognizer states and
// their transitions. It depends only on the grammar, so reuse one across allowed() calls for the
// same grammar (across sequences too); it resets itself when handed another grammar, and when it
// grows past a bound. Not thread-safe: one per thread.
class MaskCache {
 public:
  size_t states() const { return begin_.size() - 1; }
  void clear();

 private:
  friend class Vocabulary;
  static constexpr int32_t kDead = -1, kUnknown = -2;
  int32_t intern(const std::vector<uint32_t>& words);
  int32_t next(const Grammar& g, int32_t state, uint8_t byte);

  uint64_t serial_ = 0;
  std::vector<uint32_t> pool_;       // state k's words: pool_[begin_[k], begin_[k + 1])
  std::vector<uint32_t> begin_{0};
  std::vector<int32_t> next_;        // state * 256 + byte -> state, kDead or kUnknown
  std::vector<int32_t> table_;       // open addressing over state ids, -1 empty
  std::vector<int32_t> depth_state_;  // the walk's state per trie depth
  detail::StepScratch scratch_;
  std::vector<uint32_t> tmp_;
};

class Vocabulary {
 public:
  // tokens[id]: the raw bytes of token id; special[id]: matched only by <[id]> terminals. Tokens
  // with empty bytes are never allowed by bytes.
  Vocabulary(const std::vector<std::string_view>& tokens, const std::vector<bool>& special);

  int32_t size() const { return int32_t(special_.size()); }
  std::string_view bytes(int32_t id) const { return {bytes_.data() + offsets_[id], offsets_[id + 1] - offsets_[id]}; }
  bool special(int32_t id) const { return special_[id] != 0; }
  // Trie nodes (distinct non-empty prefixes of ordinary tokens).
  size_t nodes() const { return node_byte_.size(); }

  // bits := one bit per token id (bit id % 64 of word id / 64), set when allowed; ceil(V/64) words.
  void allowed(const Matcher& m, std::vector<uint64_t>& bits, MaskCache& cache) const;
  void allowed(const Matcher& m, std::vector<uint64_t>& bits) const;  // with a fresh cache
  bool allows(const Matcher& m, int32_t id) const;
  // Advances m by token id; false (m unchanged) when not allowed.
  bool accept(Matcher& m, int32_t id) const;

 private:
  std::string bytes_;
  std::vector<size_t> offsets_;
  std::vector<uint8_t> special_;
  // The trie in preorder: node i's last byte, depth (1 = first byte), the index just past its
  // subtree, and its tokens token_ids_[node_tokens_[i], node_tokens_[i + 1]).
  std::vector<uint8_t> node_byte_;
  std::vector<uint32_t> node_depth_;
  std::vector<uint32_t> node_skip_;
  std::vector<uint32_t> node_tokens_;
  std::vector<int32_t> token_ids_;
  uint32_t max_depth_ = 0;
};

}  // namespace sluice::guide
