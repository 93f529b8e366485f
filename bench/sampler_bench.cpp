// What choosing a sampled token costs the host at a 152k vocabulary (Qwen3's 151,936 rows): the
// sampler's distribution (softmax at temperature; for a top-k or a nucleus, the ids ordered by
// weight as far as they need to be) and its draw, next to the floor of one pass over the logits (greedy's argmax) in the same
// run. On a GPU decode of a couple of milliseconds a token this is host time on every sampled step.
//
// usage: sampler_bench [rows] [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "runtime/sampling.h"

namespace {

using sluice::runtime::SamplingParams;

template <class F>
double median_ms(int reps, F&& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 151936;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 30;
  if (n <= 0 || reps <= 0) {
    std::fprintf(stderr, "usage: sampler_bench [rows > 0] [reps > 0]\n");
    return 2;
  }
  // Logits spread like a language model's (a normal of deviation 3 and a few far above the rest).
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(n));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = normal(rng) + (i % 4099 == 0 ? 12.0f : 0.0f);
  volatile int32_t sink = 0;
  const double floor = median_ms(reps, [&] { sink = sluice::runtime::argmax(logits.data(), n); });
  std::printf("%lld logits, %d threads (the weights and probabilities are computed on the pool; SLUICE_THREADS); "
              "floor (argmax, one pass on one): %.3f ms\n",
              (long long)n, sluice::ThreadPool::global().size(), floor);
  const SamplingParams params[] = {{.temperature = 1.0, .seed = 1},
                                   {.temperature = 0.7, .top_p = 0.95, .seed = 1},
                                   {.temperature = 0.6, .top_p = 0.95, .top_k = 20, .seed = 1}};
  for (const SamplingParams& p : params) {
    sluice::runtime::Sampler s(p);
    std::vector<float> probs;
    s.distribution(logits.data(), n, probs);  // warm: the sampler's buffers are kept
    const double ms = median_ms(reps, [&] {
      s.distribution(logits.data(), n, probs);
      sink = s.draw(probs);
    });
    std::printf("T %.1f top_p %.2f top_k %lld: distribution + draw %.3f ms = %.1fx the floor\n", p.temperature, p.top_p,
                (long long)p.top_k, ms, ms / floor);
  }
  return 0;
}
