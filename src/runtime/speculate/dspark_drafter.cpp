// DSpark proposals and the bookkeeping that keeps its cache equal to the committed positions.
#include "runtime/speculate/dspark_drafter.h"

namespace sluice::runtime {

DSparkDrafter::DSparkDrafter(std::unique_ptr<model::DSparkModel> model, double min_confidence)
    : model_(std::move(model)), min_confidence_(min_confidence) {}

std::unique_ptr<DSparkDrafter> DSparkDrafter::load(const std::string& dir, const model::Target& target,
                                                   double min_confidence) {
  return std::make_unique<DSparkDrafter>(model::DSparkModel::load(dir, target), min_confidence);
}

void DSparkDrafter::on_committed_rows(const float* rows, int64_t n, int64_t first) {
  const int64_t have = model_->context_length(), known = have + pending_n_;
  if (first > known) {
    // Positions before `first` never reached the drafter: its cache cannot stand for them.
    in_step_ = false;
    return;
  }
  // Positions from `first` on are replaced: the target state was reset or rolled back to there.
  const int64_t width = model_->config().context_width();
  if (first < have) {
    model_->truncate(first);
    pending_n_ = 0;
  } else {
    pending_n_ = first - have;
  }
  pending_.resize(size_t((pending_n_ + n) * width));
  std::copy(rows, rows + n * width, pending_.begin() + pending_n_ * width);
  pending_n_ += n;
  in_step_ = true;
}

void DSparkDrafter::flush() {
  if (pending_n_ == 0) return;
  model_->append_context(pending_.data(), pending_n_);
  pending_n_ = 0;
}

void DSparkDrafter::catch_up(std::span<const int32_t> /*history*/) { flush(); }

std::vector<int32_t> DSparkDrafter::propose(std::span<const int32_t> history, int max_tokens) {
  if (!in_step_ || history.empty() || max_tokens <= 0) return {};
  flush();
  // The pending token (history's last) sits at the position after the committed ones, which is
  // the drafter's context length by construction.
  return model_->propose(history.back(), max_tokens, min_confidence_).tokens;
}

}  // namespace sluice::runtime
