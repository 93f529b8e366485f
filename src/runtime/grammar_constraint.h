// A grammar as a token constraint (runtime/constraint.h) over a tokenizer's vocabulary: the tokens
// allowed next are those the grammar's matcher accepts (guide/token_mask.h), plus the model's
// end-of-sequence tokens where the grammar may end; once the grammar can take nothing more, only
// those. A reply may open with a free part the grammar does not see (a reasoning block): until
// the token `starts_after` is chosen anything but an end-of-sequence token is allowed, and the
// grammar applies from the token after it.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "guide/matcher.h"
#include "guide/token_mask.h"
#include "runtime/constraint.h"

namespace sluice::tokenizer {
class Tokenizer;
}

namespace sluice::runtime {

// The tokenizer's tokens as the guide sees them: raw bytes, and special tokens (the tokenizer's
// `special` ones) matched only by <[id]> terminals. Built once per tokenizer (tens of ms at 160k).
std::shared_ptr<const guide::Vocabulary> guide_vocabulary(const tokenizer::Tokenizer& tokenizer, int64_t vocab_size);

class GrammarConstraint : public TokenConstraint {
 public:
  // A full mask is walked in `mask_parts` shares at once (guide::ParallelMasks; 0: this machine's
  // guide::default_mask_parts() for the vocabulary) when its walk reaches at least
  // `shared_walk_nodes` trie nodes' worth of first bytes, alone otherwise.
  GrammarConstraint(std::shared_ptr<const guide::Vocabulary> vocab, std::shared_ptr<const guide::Grammar> grammar,
                    std::vector<int32_t> eos_ids, int32_t starts_after = -1, int mask_parts = 0,
                    size_t shared_walk_nodes = guide::kSharedWalkNodes);
  void allowed(std::vector<uint64_t>& bits) override;
  bool allows(int32_t token) override;
  void accept(int32_t token) override;
  void save() override;
  void restore() override;
  // Starts computing the mask of the current position on the constraint's worker thread (started
  // at the first call, kept until the constraint is destroyed: a step starts no thread); the next
  // call of any other method waits for it (allowed() then copies it).
  void prepare() override;
  ~GrammarConstraint() override;

  bool in_grammar() const { return active_; }
  // The grammar's input so far is complete (the reply may end here).
  bool complete() const { return active_ && matcher_.can_end(); }
  // Masks computed (full vocabulary walks), for --stats and the benchmark, and the host time the
  // caller waited in this constraint (masks, checks and steps; a mask computed ahead counts only
  // for what was still left of it when asked for).
  // (Each waits for a mask being computed ahead, which changes them.)
  uint64_t masks() const {
    join();
    return masks_computed_;
  }
  // Of those, the ones answered by the memo of whole masks (guide::MaskCache).
  uint64_t memo_hits() const {
    join();
    return masks_ ? masks_->cache().memo_hits() : 0;
  }
  // The shares a wide walk is split into (guide::ParallelMasks::parts once one was made), and the
  // walks that were.
  int mask_parts() const {
    join();
    return masks_ ? masks_->parts() : mask_parts_;
  }
  uint64_t shared_walks() const {
    join();
    return masks_ ? masks_->shared_walks() : 0;
  }
  double wait_seconds() const { return wait_s_; }

 private:
  bool is_eos(int32_t t) const;
  // The mask at the current position; shared among the helpers only when computed ahead (while a
  // pass runs). One asked for on the step walks alone: on an H100 greedy decode (which asks only
  // where the target's choice is refused) walking alone cost 2.5-4.2 % of decode against
  // 3.8-5.6 % shared, while masks computed ahead at temperature 1 cost 3.2-5.1 % shared against
  // 12.2-15.4 % alone (docs/BENCHMARKS.md, eighteenth stop).
  void compute(std::vector<uint64_t>& bits, bool share);
  void join() const;                          // waits for prepare()'s mask, if one is running
  void work();                                // the worker: computes ahead_ whenever job_ is set

  std::shared_ptr<const guide::Vocabulary> vocab_;
  guide::Matcher matcher_;
  int mask_parts_;
  size_t shared_walk_nodes_;
  std::unique_ptr<guide::ParallelMasks> masks_;  // made at the first full mask
  std::vector<int32_t> eos_;
  int32_t starts_after_;
  bool active_;
  bool ended_ = false;  // an end-of-sequence token was accepted
  guide::MatcherState saved_;
  bool saved_active_ = false, saved_ended_ = false;
  uint64_t masks_computed_ = 0;
  double wait_s_ = 0;
  std::thread worker_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool job_ = false;   // a mask to compute ahead (mu_): set by prepare(), cleared by the worker
  bool stop_ = false;  // the worker ends (mu_)
  std::vector<uint64_t> ahead_;  // prepare()'s mask
  bool ahead_ready_ = false;
};

}  // namespace sluice::runtime
