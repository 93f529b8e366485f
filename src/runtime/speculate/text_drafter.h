// A draft model with its own tokenizer (spec §5.3): the committed target history is turned into
// text, the draft continues the text greedily in its own ids, and the continuation is re-encoded
// with the target's tokenizer; only target ids that extend the history exactly are proposed.
// The target verifies every proposal, so this drafter affects speed, never the output.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/speculate/draft_lm.h"
#include "runtime/speculate/drafter.h"
#include "tokenizer/tokenizer.h"

namespace sluice::runtime {

struct TextDrafterOptions {
  // After the first two draft tokens, generation stops at the first whose softmax probability
  // is below this (spec §5.3 step 2).
  double min_prob = 0.3;
  // Draft tokens generated per step: clamp(max_tokens + extra_tokens, 3, max_draft_tokens); the
  // slack covers draft tokens that the target's tokenizer merges.
  int extra_tokens = 2;
  int max_draft_tokens = 20;
  // A target window longer than this without a forced piece start is not re-encoded (no
  // proposal) so that a step never costs more than this many bytes of encoding.
  size_t max_window_bytes = 64 * 1024;
  // After a pause longer than this many draft ids (drafting was off), the draft restarts from the
  // last this-many ids of the context instead of consuming the whole pause, so a probe costs a
  // bounded catch-up. 0: always consume the whole context.
  size_t pause_window = 96;
};

// Counters for tests and --stats.
struct TextDrafterCounters {
  int64_t steps = 0, draft_tokens = 0, proposed = 0;
  int64_t mismatched = 0;      // steps whose re-encoding did not start with the history window
  int64_t draft_reencoded_bytes = 0, target_reencoded_bytes = 0;  // work done per step
  int64_t window_restarts = 0;  // pauses after which the draft restarted from a recent window
};

class TextDrafter : public Drafter {
 public:
  // `target` must outlive the drafter.
  TextDrafter(std::unique_ptr<DraftLm> draft, std::unique_ptr<tokenizer::Tokenizer> draft_tokenizer,
              const tokenizer::Tokenizer& target, const TextDrafterOptions& options = {});
  const char* name() const override { return "text"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int max_tokens) override;
  // Runs the draft over the history's text (the prompt's prefill, or what came since a pause).
  void catch_up(std::span<const int32_t> history) override;

  const TextDrafterCounters& counters() const { return counters_; }
  // The draft ids the last proposal was generated from (the history as draft text), for tests.
  std::span<const int32_t> last_context() const { return std::span<const int32_t>(context_).first(context_size_); }

 private:
  // Brings frozen_draft_ (the draft ids of a prefix of the history) in step with `history`.
  void sync_frozen(std::span<const int32_t> history);
  // The draft ids of the history's text; empty when it has none.
  std::vector<int32_t> draft_context(std::span<const int32_t> history);
  void freeze(std::span<const int32_t> history, size_t end, std::vector<int32_t> draft_ids);
  // Draft ids of the target tokens [from, to) of history, which contain no specials.
  void encode_text_for_draft(std::span<const int32_t> history, size_t from, size_t to, std::vector<int32_t>& out);
  void encode_special_for_draft(int32_t target_special, std::vector<int32_t>& out);
  // Feeds `context` to the draft (reusing the longest common prefix already in its cache) and
  // leaves the logits after its last id in logits_.
  void sync_draft(const std::vector<int32_t>& context);
  // The draft's greedy continuation (draft ids); *ended: the draft ended its text (EOS/special).
  std::vector<int32_t> generate(int budget, bool* ended);
  // Specials, and ids the target's tokenizer has no text for, split the history into text runs.
  bool boundary(int32_t target_id) const;
  // Where the target's re-encoding starts (see the .cpp); none when that window would be longer
  // than max_window_bytes.
  std::optional<size_t> window_start(std::span<const int32_t> history) const;
  // The target ids that the draft's continuation adds after the history (at most max_tokens).
  std::vector<int32_t> to_target(std::span<const int32_t> history, size_t start, const std::string& continuation,
                                 bool ended, int max_tokens);

  std::unique_ptr<DraftLm> draft_;
  std::unique_ptr<tokenizer::Tokenizer> draft_tok_;
  const tokenizer::Tokenizer& target_;
  TextDrafterOptions o_;
  TextDrafterCounters counters_;

  // The history's text, frozen up to a point where its draft encoding can no longer change:
  // frozen_target_ are the history ids covered, frozen_draft_ their draft ids, and marks_ the
  // (target count, draft count) of every freeze, so a diverging history rolls back to one.
  std::vector<int32_t> frozen_target_, frozen_draft_;
  std::vector<std::pair<size_t, size_t>> marks_;
  std::vector<int32_t> context_;  // the history as draft ids, as of the last proposal
  std::vector<int32_t> fed_;      // draft ids in the draft model's cache: context_[fed_start_, ...)
  size_t fed_start_ = 0;
  size_t context_size_ = 0;   // how many of them are the history's (the rest were generated)
  std::vector<float> logits_;  // after fed_'s last id when logits_current_
  bool logits_current_ = false;
  std::string text_;          // scratch
};

}  // namespace sluice::runtime
