// The sampler's distribution against its definition: a softmax at temperature in double, the ids
// in a stable descending order of their weights, the top-k and the top-p nucleus taken in that
// order; top_p 1 is no nucleus, and with no top-k either every weight over their sum in id order.
// The reference below is the definition as the sampler computed it before its radix order
// (std::stable_sort); the two must agree bit for bit on every probability, so that a seed draws the
// same tokens: with ties, with weights that underflow to zero or to subnormals, with distinct
// logits whose weights round to one value (the sampler orders by logit, then such runs by id), and
// with most logits -inf (a grammar's mask).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/sampling.h"

namespace sluice::runtime {
namespace {

std::vector<float> reference(const std::vector<float>& logits, const SamplingParams& p) {
  const int64_t n = int64_t(logits.size());
  std::vector<float> probs(static_cast<size_t>(n), 0.0f);
  double m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> e(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += e[size_t(i)] = std::exp((double(logits[size_t(i)]) - m) / p.temperature);
  if (p.top_k == 0 && p.top_p >= 1.0) {
    for (int64_t i = 0; i < n; ++i) probs[size_t(i)] = float(e[size_t(i)] / sum);
    return probs;
  }
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return e[size_t(a)] > e[size_t(b)]; });
  size_t keep = p.top_k > 0 ? std::min<size_t>(size_t(p.top_k), size_t(n)) : size_t(n);
  double mass = 0, kept_sum = 0;
  size_t k = 0;
  for (; k < keep; ++k) {
    mass += e[size_t(order[k])] / sum;
    kept_sum += e[size_t(order[k])];
    if (p.top_p < 1.0 && mass >= p.top_p) {
      ++k;
      break;
    }
  }
  for (size_t i = 0; i < k; ++i) probs[size_t(order[i])] = float(e[size_t(order[i])] / kept_sum);
  return probs;
}

TEST(Sampling, DistributionIsItsDefinitionBitForBit) {
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const SamplingParams params[] = {{.temperature = 1.0},
                                   {.temperature = 0.7, .top_p = 0.9},
                                   {.temperature = 1.3, .top_k = 40},
                                   {.temperature = 1.0, .top_k = 151935},  // every id but one, top_p 1
                                   {.temperature = 0.2, .top_p = 0.5, .top_k = 1000},
                                   {.temperature = 50.0},
                                   // A flat distribution: the nucleus is most of the vocabulary.
                                   {.temperature = 50.0, .top_p = 0.9},
                                   {.temperature = 1.0, .top_p = 0.999999},
                                   // Every weight exp(~0) = 1: distinct logits, equal weights, ordered by id.
                                   {.temperature = 1e30, .top_k = 100}};
  for (int64_t n : {1, 2, 7, 4352, 151936}) {
    for (int shape = 0; shape < 5; ++shape) {
      std::vector<float> logits(static_cast<size_t>(n));
      for (float& x : logits) x = normal(rng);
      if (shape == 1)  // many equal values: ties keep the lower id first
        for (float& x : logits) x = std::round(x);
      if (shape == 2)  // a few tokens far above the rest: most weights underflow to zero
        for (size_t i = 0; i < logits.size(); ++i) logits[i] = i % 997 == 0 ? 900.0f + logits[i] : logits[i];
      if (shape == 3)  // the rest 720 below: subnormal weights, equal for distinct logits
        for (size_t i = 0; i < logits.size(); ++i) logits[i] = i % 997 == 0 ? logits[i] : -720.0f - 0.001f * float(i % 50);
      if (shape == 4)  // masked as a grammar masks them: most logits -inf
        for (size_t i = 0; i < logits.size(); ++i) logits[i] = i % 13 == 0 ? logits[i] : -INFINITY;
      for (const SamplingParams& p : params) {
        Sampler s(p);
        std::vector<float> got;
        s.distribution(logits.data(), n, got);
        const std::vector<float> want = reference(logits, p);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i)
          ASSERT_EQ(got[i], want[i]) << "n " << n << " shape " << shape << " T " << p.temperature << " id " << i;
        s.distribution(logits.data(), n, got);  // its reused buffers give the same again
        ASSERT_TRUE(std::equal(got.begin(), got.end(), want.begin()));
      }
    }
  }
}

}  // namespace
}  // namespace sluice::runtime
