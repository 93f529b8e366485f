// Greedy and sampled token choice.
#include "runtime/sampling.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/thread_pool.h"

namespace sluice::runtime {

int32_t argmax(const float* logits, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

void check_sampling(const SamplingParams& p) {
  if (!(p.temperature >= 0.0) || !std::isfinite(p.temperature)) fail("temperature must be a finite number >= 0");
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) fail("top_p must be in (0, 1]");
  if (p.top_k < 0) fail("top_k must be >= 0");
}

Sampler::Sampler(const SamplingParams& p) : p_(p), state_(p.seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {
  check_sampling(p);
}

double Sampler::uniform() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return double(z >> 11) * (1.0 / 9007199254740992.0);
}

namespace {

// The logits' 32-bit order keys: ascending with the float's value (negative: all bits flipped;
// positive: the sign bit set); NaNs above +inf.
inline uint32_t ascending_key(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

// The smallest float whose order key is `key` (the inverse of ascending_key).
inline float from_key(uint32_t key) {
  const uint32_t bits = (key & 0x80000000u) ? key & 0x7FFFFFFFu : ~key;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

// The ids 0..n-1 ordered by e descending, equal values by ascending id: the order a stable sort by
// e gives. e = exp((logit - max) / T) does not decrease with the logit, so the ids are ordered by
// their logits (an LSD radix sort of 32-bit keys: three passes, where the weights' 64-bit patterns
// took six), and then the runs of equal e (distinct logits can round to one weight) by id. Runs of
// weights below the smallest normal double are left as they are: such a weight changes no sum and
// its probability is 0 whether kept or not, so their order changes no bit of the distribution.
// Far cheaper than std::stable_sort at a 152k vocabulary, which made ordering the vocabulary a
// large part of a sampled decode (docs/BENCHMARKS.md, "Design measurements behind code comments").
void order_descending(const float* logits, const std::vector<double>& e, std::vector<int32_t>& order,
                      std::vector<int32_t>& spare, std::vector<uint32_t>& keys, std::vector<uint32_t>& spare_keys) {
  const size_t n = e.size();
  order.resize(n);
  spare.resize(n);
  keys.resize(n);
  spare_keys.resize(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = ~ascending_key(logits[i]);  // complemented for descending
    order[i] = int32_t(i);
  }
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t(1) << kBits;
  std::array<size_t, kBuckets> count;
  for (int shift = 0; shift < 32; shift += kBits) {
    count.fill(0);
    for (size_t i = 0; i < n; ++i) ++count[(keys[i] >> shift) & (kBuckets - 1)];
    if (n == 0 || count[(keys[0] >> shift) & (kBuckets - 1)] == n) continue;  // one digit for all
    size_t at = 0;
    for (size_t& c : count) at += std::exchange(c, at);
    for (size_t i = 0; i < n; ++i) {
      const size_t to = count[(keys[i] >> shift) & (kBuckets - 1)]++;
      spare_keys[to] = keys[i];
      spare[to] = order[i];
    }
    keys.swap(spare_keys);
    order.swap(spare);
  }
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && e[size_t(order[j])] == e[size_t(order[i])]) ++j;
    if (j - i > 1 && e[size_t(order[i])] >= 0x1p-1022) std::sort(order.begin() + std::ptrdiff_t(i), order.begin() + std::ptrdiff_t(j));
    i = j;
  }
}

// The per-id work of a distribution (the weights, the probabilities) runs on the process's pool in
// ranges of at least this many ids: each id's value is computed alone, so the split changes no bit
// (the sums stay one pass in id order). At a 152k vocabulary the double exp alone took ~1.3 ms
// on one core, host time on every sampled step of a GPU decode of 1.5-2 ms.
constexpr int64_t kIdsPerRange = 8192;

}  // namespace

void Sampler::distribution(const float* logits, int64_t n, std::vector<float>& probs) const {
  if (p_.greedy()) {
    probs.assign(size_t(n), 0.0f);
    probs[size_t(argmax(logits, n))] = 1.0f;
    return;
  }
  ThreadPool& pool = ThreadPool::global();
  // Softmax at temperature in double, then keep the top-k and the top-p nucleus (ties keep the
  // lower id first, so the kept set is deterministic). top_p 1 is no nucleus (as transformers and
  // vLLM read it), not a cut where the sum of the ordered probabilities first rounds to 1: every
  // token keeps its weight, and without a top-k no order is needed at all.
  double m = *std::max_element(logits, logits + n);
  std::vector<double>& e = scratch_.e;
  e.resize(size_t(n));
  const double temperature = p_.temperature;
  pool.parallel_for(n, kIdsPerRange, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) e[size_t(i)] = std::exp((double(logits[i]) - m) / temperature);
  });
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += e[size_t(i)];
  const size_t keep = p_.top_k > 0 ? std::min<size_t>(size_t(p_.top_k), size_t(n)) : size_t(n);
  const bool nucleus = p_.top_p < 1.0;
  probs.resize(size_t(n));
  if (keep == size_t(n) && !nucleus) {
    pool.parallel_for(n, kIdsPerRange, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) probs[size_t(i)] = float(e[size_t(i)] / sum);
    });
    return;
  }
  std::fill(probs.begin(), probs.end(), 0.0f);
  // The kept ids are the first k of the order, k where the top-k or the top-p nucleus ends: the walk
  // over the first `len` ids of an order sets k and the kept weights' sum, or says it needs more.
  size_t k = 0;
  double kept_sum = 0;
  auto walk = [&](const std::vector<int32_t>& ord, size_t len) {
    double mass = 0;
    kept_sum = 0;
    for (k = 0; k < keep; ++k) {
      if (k == len) return false;
      mass += e[size_t(ord[k])] / sum;
      kept_sum += e[size_t(ord[k])];
      if (nucleus && mass >= p_.top_p) {
        ++k;
        break;
      }
    }
    return true;
  };
  auto emit = [&](const std::vector<int32_t>& ord) {
    for (size_t i = 0; i < k; ++i) probs[size_t(ord[i])] = float(e[size_t(ord[i])] / kept_sum);
  };
  // A nucleus or top-k usually ends within a few hundred ids: order only a prefix. Every id whose
  // weight is at least some bound's weight, ordered by weight then id, is exactly the first ids of
  // the whole order (every other weight is smaller). The bound is the lower edge of the bucket that
  // holds the want-th largest logit in a histogram of their keys' top 16 bits (buckets 1/128 of a
  // power of two wide), so the prefix holds the want largest and that bucket's other ids; it is
  // widened while the walk runs past it, and an eighth of the vocabulary or more is ordered whole
  // (the radix order is cheaper there). (Not with NaN weights, which no order of weights holds:
  // the radix order of the logits does.)
  const size_t first_want = std::min(keep, size_t(512));
  if (!std::isnan(sum) && first_want < size_t(n) / 8) {
    std::vector<uint32_t>& hist = scratch_.hist;
    std::vector<int32_t>& prefix = scratch_.prefix;
    hist.assign(size_t(1) << 16, 0);
    for (int64_t i = 0; i < n; ++i) ++hist[ascending_key(logits[i]) >> 16];
    size_t bucket = hist.size(), above = 0;  // ids in buckets >= bucket
    for (size_t want = first_want; want > 0 && want < size_t(n) / 8; want *= 4) {
      while (above < want && bucket > 0) above += hist[--bucket];
      if (above >= size_t(n) / 8) break;
      float bound = from_key(uint32_t(bucket) << 16);
      if (std::isnan(bound)) bound = -INFINITY;  // the bucket of -inf starts at NaN patterns
      // The bound's weight, computed as e is (weights do not decrease with logits).
      const double cut = std::exp((double(bound) - m) / p_.temperature);
      prefix.clear();
      for (int64_t i = 0; i < n; ++i)
        if (e[size_t(i)] >= cut) prefix.push_back(int32_t(i));
      if (prefix.size() >= size_t(n) / 8) break;
      std::sort(prefix.begin(), prefix.end(), [&](int32_t a, int32_t b) {
        return e[size_t(a)] > e[size_t(b)] || (e[size_t(a)] == e[size_t(b)] && a < b);
      });
      if (walk(prefix, prefix.size())) return emit(prefix);
    }
  }
  std::vector<int32_t>& order = scratch_.order;
  order_descending(logits, e, order, scratch_.spare, scratch_.keys, scratch_.spare_keys);
  walk(order, order.size());
  emit(order);
}

int32_t Sampler::draw(std::span<const float> probs) {
  double total = 0;
  for (float p : probs) total += p;
  if (!(total > 0)) fail("sampling from an empty distribution");
  double u = uniform() * total, acc = 0;
  int32_t last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    acc += probs[i];
    last = int32_t(i);
    if (u < acc) return int32_t(i);
  }
  return last;
}

}  // namespace sluice::runtime
