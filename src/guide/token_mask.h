// Token masks: which vocabulary tokens a Matcher allows next, exactly. Token t is allowed when
// its bytes are accepted from the matcher's state (ordinary tokens with bytes) or when the grammar
// expects the terminal <[t]> there (any token; the only way for special tokens).
//
// The vocabulary's byte strings are kept as a trie laid out in preorder, so one linear pass visits
// every shared prefix once and skips a whole subtree as soon as its first byte is rejected. The
// recognizer's states along the way are interned, and the transition (state, byte) -> state is
// memoized in a MaskCache: inside JSON string contents almost every byte leads back to the same
// state, so most trie nodes cost one table lookup rather than a recognizer step. Whole masks are
// memoized by their start state too: a decode writing an unbounded string returns to the same
// state token after token, and then a mask is a copy, not a walk.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "guide/matcher.h"

namespace sluice::guide {

// The part of a grammar's byte-level automaton learnt so far: interned recognizer states and
// their transitions, and the whole masks of start states met (the memo). The transitions depend
// only on the grammar, the memo also on the vocabulary, so reuse one across allowed() calls for the
// same grammar (across sequences too); it resets itself when handed another grammar, and when it
// grows past a bound, and forgets its masks when handed another vocabulary. Not thread-safe: one
// per thread.
class MaskCache {
 public:
  size_t states() const { return begin_.size() - 1; }
  // Masks answered from the memo / computed by a walk, since construction.
  uint64_t memo_hits() const { return memo_hits_; }
  uint64_t walks() const { return walks_; }
  void clear();

 private:
  friend class Vocabulary;
  friend class ParallelMasks;
  static constexpr int32_t kDead = -1, kUnknown = -2;
  int32_t intern(const std::vector<uint32_t>& words);
  int32_t next(const Grammar& g, int32_t state, uint8_t byte);
  // The memoized mask of start state `state` (`words` words), or null.
  const uint64_t* memo(int32_t state) const;
  void remember(int32_t state, const std::vector<uint64_t>& bits);
  void clear_memo();

  uint64_t serial_ = 0;
  std::vector<uint32_t> pool_;       // state k's words: pool_[begin_[k], begin_[k + 1])
  std::vector<uint32_t> begin_{0};
  std::vector<int32_t> next_;        // state * 256 + byte -> state, kDead or kUnknown
  std::vector<int32_t> table_;       // open addressing over state ids, -1 empty
  std::vector<int32_t> depth_state_;  // the walk's state per trie depth
  detail::StepScratch scratch_;
  std::vector<uint32_t> tmp_;
  // Whole masks by start state over vocabulary memo_vocab_ (its serial), in slots of memo_words_
  // words replaced round-robin.
  uint64_t memo_vocab_ = 0;
  std::vector<int32_t> memo_slot_;   // state -> slot, -1 when none
  std::vector<int32_t> memo_state_;  // slot -> state
  std::vector<uint64_t> memo_bits_;
  size_t memo_words_ = 0, memo_victim_ = 0;
  uint64_t memo_hits_ = 0, walks_ = 0;
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
  uint64_t serial_;  // distinct for every vocabulary made in this process (a cache's memo is per vocabulary)

  friend class ParallelMasks;
  // The reset check, and the start state interned; the memoized mask, if any, into bits.
  int32_t enter(const Matcher& m, std::vector<uint64_t>& bits, MaskCache& cache, bool* hit) const;
  // The bits of the token terminals the grammar expects at m.
  void token_terminals(const Matcher& m, uint64_t* out) const;
  // Sets the bits of the tokens whose bytes are accepted from interned state `first`, walking
  // trie nodes [begin, end): begin is a first-byte node, or a second-byte one whose first-byte
  // node is `root` (the walk then starts from the state after root's byte).
  void walk(MaskCache& cache, const Grammar& g, int32_t first, uint64_t* out, size_t begin, size_t end,
            size_t root) const;
};

// A walk whose start state lets through first bytes heading fewer trie nodes than this is not
// worth waking helper threads for (a JSON key's opening quote, a number: 0.05-0.1 ms alone on one
// thread, while waking three helpers on the H100 host's Xeon cost ~0.1 ms a mask).
inline constexpr size_t kSharedWalkNodes = 65536;

// Masks walked by several threads at once: the trie is cut into chunks (about eight per share, at
// first- or second-byte nodes), which the calling thread and up to parts - 1 helper threads take
// in turn from a shared counter, each walking with a MaskCache of its own and setting its own bits;
// the bits are or-ed, so the mask is allowed()'s, bit for bit, whoever walked which chunk. The
// caller starts walking at once and never waits for a helper to wake: one that wakes after the
// last chunk was taken goes back to sleep, so a short walk costs the caller no more than alone.
// For a decode whose pass is shorter than one walk (a GPU's ~2 ms against ~2 ms for a 150k-token
// mask whose state is new, as inside a string under maxLength). Only a wide walk wakes the helpers:
// one whose start state accepts first bytes whose subtrees hold at least `min_shared_nodes` trie
// nodes (counted from the first-byte transitions, which the walk needs anyway); a narrower one runs
// on the calling thread alone. Helpers start at the first shared walk and live until destruction.
// Memoized masks are answered on the calling thread. One caller at a time.
class ParallelMasks {
 public:
  ParallelMasks(std::shared_ptr<const Vocabulary> vocab, int parts, size_t min_shared_nodes = kSharedWalkNodes);
  ~ParallelMasks();
  ParallelMasks(const ParallelMasks&) = delete;
  ParallelMasks& operator=(const ParallelMasks&) = delete;

  // share false: walk alone on the calling thread, however wide.
  void allowed(const Matcher& m, std::vector<uint64_t>& bits, bool share = true);
  int parts() const { return parts_; }
  const MaskCache& cache() const { return caches_[0]; }  // the memo's, and the caller's walks'
  uint64_t shared_walks() const { return shared_walks_; }  // walks the helpers were woken for
  uint64_t helped_walks() const { return helped_walks_; }  // of those, walks a helper took part in
  // For tests: the caller walks no chunk of a shared walk itself but waits for the helpers to walk
  // them all, so every shared walk is the helpers' (at once, from three shares up).
  void leave_chunks_to_helpers(bool on) { leave_chunks_ = on; }

 private:
  void help(size_t k, uint64_t seen);  // helper k's loop, from round `seen` on
  // Walks chunks taken from next_chunk_ until none is left, with cache k into out.
  void take_chunks(size_t k, const Matcher& m, int32_t first, uint64_t* out);
  // Whether the walk from interned state `first` reaches at least min_shared_nodes_ nodes' worth
  // of first-byte subtrees (the transitions learnt into the caller's cache).
  bool wide(const Grammar& g, int32_t first);

  std::shared_ptr<const Vocabulary> vocab_;
  int parts_;
  size_t min_shared_nodes_;
  std::vector<uint32_t> roots_;         // the first-byte nodes, in preorder
  std::vector<size_t> chunks_;          // chunk c: trie nodes [chunks_[c], chunks_[c + 1])
  std::vector<size_t> chunk_root_;      // chunk c's first-byte node (its first node's, or itself)
  std::vector<MaskCache> caches_;       // [0] the caller's, [k] helper k's
  std::vector<std::vector<uint64_t>> shares_;  // helper k's bits at [k]
  std::vector<std::thread> helpers_;    // started at the first shared walk
  std::atomic<size_t> next_chunk_{0};   // the next chunk to take this round
  uint64_t shared_walks_ = 0, helped_walks_ = 0;
  bool leave_chunks_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  const Matcher* job_ = nullptr;  // the matcher being masked (mu_)
  uint64_t round_ = 0;            // bumped per mask handed to the helpers (mu_)
  bool open_ = false;             // helpers may still join this round (mu_)
  size_t active_ = 0;             // helpers walking this round (mu_)
  std::vector<uint8_t> joined_;   // helper k joined this round (mu_)
  std::exception_ptr error_;      // the first helper's failure this round, rethrown by allowed() (mu_)
  bool stop_ = false;             // (mu_)
};

// The shares a parallel mask over a trie of `trie_nodes` (Vocabulary::nodes()) is split into on
// this machine: a quarter of its hardware threads, 1 to 4, from kSharedWalkNodes nodes up (a 160k
// vocabulary has ~330k); 1 below, where no walk is wide enough to share (a single share walks on
// the caller's thread alone). SLUICE_MASK_PARTS=N sets it for any vocabulary (walks narrower than
// kSharedWalkNodes still run alone).
int default_mask_parts(size_t trie_nodes);

}  // namespace sluice::guide
