// A draft language model as a drafter drives it, whatever its architecture: a causal LM over its
// own token ids whose context grows with forward() and can be cut back to any prefix.
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "model/target.h"

namespace sluice::runtime {

class DraftLm {
 public:
  virtual ~DraftLm() = default;
  virtual int64_t vocab_size() const = 0;
  virtual bool is_eos(int32_t id) const = 0;
  // Positions in the context.
  virtual int64_t length() const = 0;
  // Keeps the first n positions (0 <= n <= length()).
  virtual void truncate(int64_t n) = 0;
  // Appends `tokens` (at least one) to the context; `logits` receives the last row's [vocab].
  virtual void forward(std::span<const int32_t> tokens, float* logits) = 0;
};

// Any target as a draft: a state that can be cut back in place (a KV cache) is; otherwise (KDA's
// recurrent state) truncation restores the latest snapshot at or before the cut and replays the
// kept ids from there.
std::unique_ptr<DraftLm> make_draft_lm(std::unique_ptr<model::Target> m);

}  // namespace sluice::runtime
