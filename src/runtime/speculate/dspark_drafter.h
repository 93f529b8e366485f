// The DSpark block drafter behind the Drafter interface: it asks the generation loop for the
// target's hidden rows at its target_layer_ids, keeps its compact cache in step with the
// committed positions, and proposes one block after the pending token.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/arch/dspark.h"
#include "runtime/speculate/drafter.h"

namespace sluice::runtime {

class DSparkDrafter : public Drafter {
 public:
  // min_confidence > 0 cuts a proposal at the first draft whose σ(confidence) is below it.
  explicit DSparkDrafter(std::unique_ptr<model::DSparkModel> model, double min_confidence = 0.0);
  // Loads a DSpark checkpoint directory checked against `target` (which must outlive the drafter).
  static std::unique_ptr<DSparkDrafter> load(const std::string& dir, const model::Target& target,
                                             double min_confidence = 0.0);

  const char* name() const override { return "dspark"; }
  std::vector<int32_t> propose(std::span<const int32_t> history, int max_tokens) override;
  const std::vector<int64_t>* wants_hidden() const override { return &model_->config().target_layer_ids; }
  void on_committed_rows(const float* rows, int64_t n, int64_t first) override;
  // Rows arrive every step but are only turned into cache entries when a proposal needs them,
  // in one batched pass: while drafting is off a step costs a copy, not a context projection.
  void catch_up(std::span<const int32_t> history) override;

  const model::DSparkModel& model() const { return *model_; }
  // Committed positions the drafter holds: in its cache, or received and not yet appended.
  int64_t context_length() const { return model_->context_length() + pending_n_; }
  // False after rows arrived with a gap (the drafter joined a sequence midway): it proposes
  // nothing until the target starts over from a position it has seen.
  bool in_step() const { return in_step_; }

 private:
  // Cache entries for the rows not yet appended (positions context_length() onward).
  void flush();
  std::unique_ptr<model::DSparkModel> model_;
  double min_confidence_;
  bool in_step_ = true;
  std::vector<float> pending_;  // [pending_n_, layers · hidden]
  int64_t pending_n_ = 0;
};

}  // namespace sluice::runtime
