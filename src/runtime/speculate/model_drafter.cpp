// Draft-model proposals: sync the draft state to the history (rolling back what the target
// rejected), then decode greedily on a snapshot that is restored afterwards.
#include "runtime/speculate/model_drafter.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/sampling.h"

namespace sluice::runtime {

ModelDrafter::ModelDrafter(std::unique_ptr<model::Target> draft, int64_t target_vocab)
    : model_(std::move(draft)), state_(model_->new_state()), snap_(model_->new_snapshot()) {
  if (model_->info().vocab_size < target_vocab)
    fail("draft model vocabulary (", model_->info().vocab_size, ") is smaller than the target's (", target_vocab,
         "); a same-tokenizer drafter must cover every target id");
  logits_.resize(size_t(model_->info().vocab_size));
}

void ModelDrafter::sync(std::span<const int32_t> history) {
  if (history.empty()) return;
  const size_t end = history.size() - 1;  // feed everything but the pending token
  // The state must have consumed exactly history[start_, start_ + fed_.size()). A recurrent state
  // cannot be cut back, so a history that diverges from it (a new request) means replaying from
  // the start, and a long pause means restarting from a recent window.
  const bool in_step = start_ + fed_.size() <= end &&
                       std::equal(fed_.begin(), fed_.end(), history.begin() + long(start_));
  if (!in_step) {
    state_->reset();
    fed_.clear();
    start_ = 0;
  } else if (!fed_.empty() && end - (start_ + fed_.size()) > kPauseWindow) {
    state_->reset();
    fed_.clear();
    start_ = end - kPauseWindow;
  }
  if (end > start_ + fed_.size()) {
    auto chunk = history.subspan(start_ + fed_.size(), end - start_ - fed_.size());
    model_->forward(*state_, chunk, model::PassOptions{}, logits_.data());
    fed_.insert(fed_.end(), chunk.begin(), chunk.end());
  }
}

std::vector<int32_t> ModelDrafter::propose(std::span<const int32_t> history, int max_tokens) {
  if (max_tokens <= 0 || history.empty()) return {};
  sync(history);
  model_->save(*state_, *snap_);
  std::vector<int32_t> out;
  int32_t next = history.back();
  const int64_t V = model_->info().vocab_size;
  for (int i = 0; i < max_tokens; ++i) {
    model_->forward(*state_, std::span<const int32_t>(&next, 1), model::PassOptions{}, logits_.data());
    next = argmax(logits_.data(), V);
    out.push_back(next);
  }
  model_->restore(*state_, *snap_);
  return out;
}

}  // namespace sluice::runtime
