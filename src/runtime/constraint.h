// Guided decoding's seam in the generation loop: a TokenConstraint says which tokens the target may
// choose next (a grammar's next tokens, runtime/guide.h), and the loop chooses among those only. The
// target still decides every token: its logits outside the allowed set count as -inf, and greedy
// or sampling then go as without a constraint. Drafts are judged the same way (a draft the
// constraint refuses is rejected before anything else), so greedy output with drafting on equals
// greedy output with it off under the same constraint.
#pragma once
#include <cstdint>
#include <vector>

namespace sluice::runtime {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets bit t of `bits` (ceil(vocab / 64) words) for every token t allowed next, and clears the
  // others. End-of-sequence tokens are the constraint's to allow (where its language may end).
  // A constraint always allows at least one token.
  virtual void allowed(std::vector<uint64_t>& bits) = 0;
  // Whether `token` is allowed next: allowed()'s bit, usually much cheaper.
  virtual bool allows(int32_t token) = 0;
  // Moves past `token`, which was allowed.
  virtual void accept(int32_t token) = 0;
  // One saved position: a verify pass judges drafts one after another from a copy of it.
  virtual void save() = 0;
  virtual void restore() = 0;
  // A hint that allowed() will be asked at the current position after the pass that is about to
  // run: a constraint may compute it meanwhile (off the critical path). Never changes an answer.
  virtual void prepare() {}
};

inline bool bit(const std::vector<uint64_t>& bits, int64_t t) { return (bits[size_t(t >> 6)] >> (t & 63)) & 1; }

}  // namespace sluice::runtime
