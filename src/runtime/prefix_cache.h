// The prefix cache in RAM: states of recent prompts kept under a byte budget, so that a request
// that shares a prefix with any recent one (not only with the conversation the session holds)
// prefills only the rest. Exact: a restored state is, bit for bit, the state a prefill of its
// tokens computes.
//
// It keeps two kinds of entries:
//  - whole states (Target::write_state's bytes) with the tokens they hold. A session's state is
//    kept here when a request is about to move it off tokens that nothing else holds (not when
//    the request continues the same conversation and differs only in the reply, which clients
//    send back in their own rendering);
//  - for targets whose states cannot be cut back (recurrent layers such as KDA): recurrent parts
//    (Target::write_recurrent's bytes, no cache rows) at the block boundaries of every prefill and
//    at the end of each prompt. A part of length p restores the state of its p tokens over any
//    state that holds those same p tokens or more (its cache rows below p are then the ones the
//    part's state had): the session's own state, or a whole state loaded from here. A part costs
//    the recurrent bytes only (K3: its KDA matrices), not the cache rows that grow with the prompt.
// A target that can truncate (KV and MLA caches) needs no parts: a whole state stands for every
// prefix of its tokens.
//
// Entries leave least recently used first once their bytes pass the budget (tokens included).
// Thread-safe; one cache serves every session of an engine.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "model/target.h"

namespace sluice::runtime {

class PrefixCache {
 public:
  using Tokens = std::shared_ptr<const std::vector<int32_t>>;
  struct Counters {
    int64_t restores = 0;         // requests that got a prefix from here or from their own state
    int64_t restored_tokens = 0;  // prompt tokens those prefixes held
    int64_t whole_loads = 0, part_loads = 0;
    int64_t wholes_kept = 0, parts_kept = 0, evicted = 0, too_large = 0;
    double restore_ms = 0, keep_ms = 0;  // loading entries / writing them
  };

  explicit PrefixCache(uint64_t budget_bytes);

  // Makes `st`, which holds exactly `tape` (empty: nothing known), hold the longest prefix of
  // `prompt` it can, leaving at least one prompt token to feed: st as it is when the prompt extends
  // its tape, st cut back or under a part, or a whole state (and maybe a part over it). The first
  // `tape_prompt` tokens of the tape were its request's prompt, the rest its reply: before st
  // leaves its tape at a point inside that prompt, it is kept as a whole state (unless one holds
  // the same tokens). Returns the prefix's length; 0 leaves st reset. `split` (a target that
  // cannot cut back): set to the longest prefix of the prompt that any sequence known here shares
  // with it when that is at least 64 tokens longer than what was restored (else 0): the caller
  // keeps a part there (GenerateOptions::snapshot_at), so that the next prompt sharing as much
  // resumes from it (four conversations with one system prompt: the third and fourth resume where
  // the second left the first).
  size_t restore(const model::Target& m, model::State& st, std::span<const int32_t> tape, size_t tape_prompt,
                 std::span<const int32_t> prompt, size_t* split = nullptr);
  // st holds exactly tokens[0, st.length()): keeps its recurrent part (targets that can truncate
  // need none: a no-op for them).
  void keep_part(const model::Target& m, const model::State& st, const Tokens& tokens);
  // st holds exactly `tape`: keeps it as a whole state unless one of the same tokens is here.
  void keep_whole(const model::Target& m, const model::State& st, std::span<const int32_t> tape);

  size_t wholes() const;
  size_t parts() const;
  uint64_t bytes() const;
  uint64_t budget() const { return budget_; }
  Counters counters() const;

 private:
  struct Whole {
    std::vector<int32_t> tokens;
    std::vector<uint8_t> bytes;
    int64_t used = 0;
  };
  struct Part {
    Tokens tokens;  // its state's tokens are the first `length`
    int64_t length = 0;
    std::vector<uint8_t> bytes;
    int64_t used = 0;
  };
  static uint64_t cost(const Whole& w) { return w.bytes.size() + 4 * w.tokens.size(); }
  static uint64_t cost(const Part& p) { return p.bytes.size() + 4 * uint64_t(p.length); }
  struct Plan {
    size_t use = 0;   // prompt tokens the state will hold
    int source = -1;  // the whole state to load first; -1: the session's own state
    size_t part = 0;  // the part to read over it; parts_.size(): none
  };
  Plan plan_for(std::span<const int32_t> tape, std::span<const int32_t> prompt, bool cut) const;
  // The longest part whose tokens are prompt[0, length) with length <= limit; parts_.size() if none.
  size_t best_part(std::span<const int32_t> prompt, size_t limit) const;
  void keep_whole_locked(const model::Target& m, const model::State& st, std::span<const int32_t> tape);
  Whole* find_whole(std::span<const int32_t> tape);  // the whole state of exactly these tokens, or null
  // The most any sequence here (the session's tape, whole states, parts' prompts) shares with the
  // prompt, at most prompt.size() - 1.
  size_t shared_prefix(std::span<const int32_t> tape, std::span<const int32_t> prompt) const;
  // Least recently used entries out until the bytes fit the budget (the most recent is kept).
  void evict();

  uint64_t budget_;
  mutable std::mutex mu_;
  std::vector<Whole> wholes_;
  std::vector<Part> parts_;
  uint64_t bytes_ = 0;
  int64_t clock_ = 0;
  Counters counters_;
};

}  // namespace sluice::runtime
