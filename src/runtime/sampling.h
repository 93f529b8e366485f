// Token choice from target logits: greedy (temperature 0) or sampling with temperature, top-k
// and top-p from a seeded generator, so runs are reproducible.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace sluice::runtime {

struct SamplingParams {
  double temperature = 0.0;  // 0 = greedy
  double top_p = 1.0;        // (0, 1]
  int64_t top_k = 0;         // 0 = no limit
  uint64_t seed = 0;
  bool greedy() const { return temperature <= 0.0; }
};

// Validates the parameters; throws naming the bad one.
void check_sampling(const SamplingParams& p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  const SamplingParams& params() const { return p_; }
  // The distribution the target samples from (after temperature, top-k, top-p), as probabilities
  // over the full vocabulary (zeros outside the kept set). Greedy: a point mass on the argmax.
  void distribution(const float* logits, int64_t n, std::vector<float>& probs) const;
  // Draws an index from `probs` (which need not be normalised).
  int32_t draw(std::span<const float> probs);
  double uniform();  // [0, 1)

 private:
  SamplingParams p_;
  uint64_t state_;
  // distribution()'s working vectors, kept so that a sampled step allocates nothing once warm.
  struct Scratch {
    std::vector<double> e;
    std::vector<int32_t> order, spare;
    std::vector<uint32_t> keys, spare_keys;
    std::vector<uint32_t> hist;   // the logits' key histogram, for a prefix's bound
    std::vector<int32_t> prefix;  // the ids of a nucleus-sized prefix of the order
  };
  mutable Scratch scratch_;
};

int32_t argmax(const float* logits, int64_t n);

}  // namespace sluice::runtime
