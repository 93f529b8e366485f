// A draft model with the target's tokenizer (any architecture sluice loads): it keeps its own
// sequence state in step with the committed history and proposes its greedy continuation.
#pragma once
#include <memory>
#include <vector>

#include "model/target.h"
#include "runtime/speculate/drafter.h"

namespace sluice::runtime {

class ModelDrafter : public Drafter {
 public:
  // The draft's vocabulary must cover the target's token ids.
  ModelDrafter(std::unique_ptr<model::Target> draft, int64_t target_vocab);
  const char* name() const override { return "model"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int max_tokens) override;
  void catch_up(std::span<const int32_t> history) override { sync(history); }

 private:
  // Brings the draft state to history minus its last token.
  void sync(std::span<const int32_t> history);
  std::unique_ptr<model::Target> model_;
  std::unique_ptr<model::State> state_;
  std::unique_ptr<model::Snapshot> snap_;  // the state before a proposal, restored after it
  std::vector<int32_t> fed_;  // tokens the draft state has consumed: history[start_, start_ + fed_.size())
  size_t start_ = 0;
  // After a pause longer than this (drafting was off), the draft restarts from the last this-many
  // tokens instead of consuming the whole pause: a probe then costs a bounded catch-up.
  static constexpr size_t kPauseWindow = 64;
  std::vector<float> logits_;
};

}  // namespace sluice::runtime
