// DraftLm over any target: in-place truncation where the architecture has it, snapshots + replay
// where it does not.
#include "runtime/speculate/draft_lm.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace sluice::runtime {
namespace {

class TargetLm final : public DraftLm {
 public:
  explicit TargetLm(std::unique_ptr<model::Target> m)
      : m_(std::move(m)), st_(m_->new_state()), scratch_(size_t(m_->info().vocab_size)) {
    cuts_in_place_ = m_->truncate(*st_, 0);  // a no-op on the empty state that says whether it can
  }
  int64_t vocab_size() const override { return m_->info().vocab_size; }
  bool is_eos(int32_t id) const override { return m_->info().is_eos(id); }
  int64_t length() const override { return st_->length(); }

  void truncate(int64_t n) override {
    if (n < 0 || n > st_->length()) fail("draft truncate(", n, ") outside 0..", st_->length());
    if (n == st_->length()) return;
    ids_.resize(static_cast<size_t>(n));
    if (cuts_in_place_) {
      m_->truncate(*st_, n);
      return;
    }
    // The recurrent state has no per-position history: restore the latest snapshot taken at or
    // before n (one is taken before every forward call, so rejected draft rows usually cost
    // nothing to drop) and replay the ids from there to n.
    while (used_ > 0 && pool_[used_ - 1]->length() > n) --used_;
    if (used_ == 0) st_->reset();
    else m_->restore(*st_, *pool_[used_ - 1]);
    if (n > st_->length())
      forward(std::span<const int32_t>(ids_).subspan(static_cast<size_t>(st_->length())), scratch_.data(), false);
  }
  void forward(std::span<const int32_t> tokens, float* logits) override { forward(tokens, logits, true); }

 private:
  void forward(std::span<const int32_t> tokens, float* logits, bool append) {
    if (!cuts_in_place_) save_snapshot();
    m_->forward(*st_, tokens, model::PassOptions{}, logits);
    if (append) ids_.insert(ids_.end(), tokens.begin(), tokens.end());
  }
  // Keeps the latest kMaxSnapshots snapshots, ascending by length, in preallocated objects.
  void save_snapshot() {
    if (used_ == pool_.size()) {
      if (pool_.size() < kMaxSnapshots) {
        pool_.push_back(m_->new_snapshot());
      } else {
        std::rotate(pool_.begin(), pool_.begin() + 1, pool_.end());
        --used_;
      }
    }
    m_->save(*st_, *pool_[used_++]);
  }

  static constexpr size_t kMaxSnapshots = 32;
  std::unique_ptr<model::Target> m_;
  std::unique_ptr<model::State> st_;
  bool cuts_in_place_ = false;
  std::vector<std::unique_ptr<model::Snapshot>> pool_;  // pool_[0, used_) are live, ascending lengths
  size_t used_ = 0;
  std::vector<int32_t> ids_;  // the context's ids
  std::vector<float> scratch_;
};

}  // namespace

std::unique_ptr<DraftLm> make_draft_lm(std::unique_ptr<model::Target> m) { return std::make_unique<TargetLm>(std::move(m)); }

}  // namespace sluice::runtime
