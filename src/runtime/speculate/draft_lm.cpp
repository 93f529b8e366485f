// DraftLm over the architectures sluice loads.
#include "runtime/speculate/draft_lm.h"

#include <vector>

#include "core/error.h"

namespace sluice::runtime {
namespace {

class Qwen3Lm final : public DraftLm {
 public:
  explicit Qwen3Lm(std::unique_ptr<model::Qwen3Model> m) : m_(std::move(m)), st_(m_->new_state()) {}
  int64_t vocab_size() const override { return m_->config().vocab_size; }
  bool is_eos(int32_t id) const override { return m_->config().is_eos(id); }
  int64_t length() const override { return st_.length(); }
  void truncate(int64_t n) override { st_.truncate(n); }
  void forward(std::span<const int32_t> tokens, float* logits) override {
    m_->forward(st_, tokens, model::PassOptions{}, logits);
  }

 private:
  std::unique_ptr<model::Qwen3Model> m_;
  model::Qwen3State st_;
};

class KimiLm final : public DraftLm {
 public:
  explicit KimiLm(std::unique_ptr<model::KimiModel> m) : m_(std::move(m)), st_(m_->new_state()) {}
  int64_t vocab_size() const override { return m_->config().vocab_size; }
  bool is_eos(int32_t id) const override { return id == m_->config().eos_token_id; }
  int64_t length() const override { return st_.length(); }
  void truncate(int64_t n) override {
    if (n < 0 || n > st_.length()) fail("draft truncate(", n, ") outside 0..", st_.length());
    if (n == st_.length()) return;
    // The recurrent KDA state has no per-position history: restore the latest snapshot taken at
    // or before n (one is taken before every forward call, so rejected draft rows usually cost
    // nothing to drop) and replay the ids from there to n.
    while (!snaps_.empty() && snaps_.back().length > n) snaps_.pop_back();
    if (snaps_.empty()) st_.reset();
    else st_.restore(snaps_.back());
    ids_.resize(static_cast<size_t>(n));
    if (n > st_.length()) {
      std::vector<float> scratch(static_cast<size_t>(vocab_size()));
      forward(std::span<const int32_t>(ids_).subspan(static_cast<size_t>(st_.length())), scratch.data(), false);
    }
  }
  void forward(std::span<const int32_t> tokens, float* logits) override { forward(tokens, logits, true); }

 private:
  void forward(std::span<const int32_t> tokens, float* logits, bool append) {
    if (snaps_.size() == kMaxSnapshots) snaps_.erase(snaps_.begin());
    snaps_.push_back(st_.snapshot());
    m_->forward(st_, tokens, model::PassOptions{}, logits);
    if (append) ids_.insert(ids_.end(), tokens.begin(), tokens.end());
  }

  static constexpr size_t kMaxSnapshots = 32;
  std::unique_ptr<model::KimiModel> m_;
  model::SequenceState st_;
  std::vector<model::SequenceState::Snapshot> snaps_;  // ascending lengths
  std::vector<int32_t> ids_;                           // the context's ids
};

}  // namespace

std::unique_ptr<DraftLm> make_draft_lm(std::unique_ptr<model::Qwen3Model> m) {
  return std::make_unique<Qwen3Lm>(std::move(m));
}

std::unique_ptr<DraftLm> make_draft_lm(std::unique_ptr<model::KimiModel> m) {
  return std::make_unique<KimiLm>(std::move(m));
}

}  // namespace sluice::runtime
