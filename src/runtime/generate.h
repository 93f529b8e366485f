// The generation loop: prefill the prompt in passes of bounded length, then decode. Each decode
// step feeds the pending token, plus the drafts a drafter proposed: one multi-row verify pass
// scores them all, the longest prefix the target agrees with is committed (the rest rolled back)
// and the target's own next token follows. The target decides every token: greedy output is the
// same with drafting on or off, and sampled output keeps the target's distribution exactly.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/target.h"
#include "runtime/constraint.h"
#include "runtime/sampling.h"
#include "runtime/speculate/controller.h"
#include "runtime/speculate/drafter.h"

namespace sluice::runtime {

// A generated token's log-probability and the most likely tokens at its position
// (GenerateOptions::on_logprobs).
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // (token, log-probability), most likely first
};

struct GenerateOptions {
  int64_t max_new = 32;
  int64_t prefill_chunk = 0;    // positions per prefill pass; 0 = as many as prefill_memory allows
  double prefill_memory = 2e9;  // bytes of pass scratch a prefill chunk may use (sets its length)
  bool stop_at_eos = true;
  SamplingParams sampling;      // default: greedy
  Drafter* drafter = nullptr;   // optional
  ControllerOptions controller;
  int fixed_depth = -1;         // >= 0: always draft this many (tests, benchmarks); -1: controller decides
  // Cancellation (SIGINT in `run`, a client gone in `serve`): any thread may set *cancel; the
  // loop checks it before every prefill chunk and decode step, and the target before every layer
  // of a pass. generate() then returns what it generated so far with stop_reason "cancelled",
  // and the state is unusable until reset (Session::generate resets it). Never cleared by sluice.
  const std::atomic<bool>* cancel = nullptr;
  // Guided decoding (runtime/constraint.h): each generated token is chosen among those the
  // constraint allows, and the constraint moves past it. Not owned; null = no constraint.
  TokenConstraint* constraint = nullptr;
  // Sees the logits each token was chosen from (V floats, before any constraint), before it is
  // emitted; called only when nothing is drafted (a verify pass chooses several tokens at once).
  std::function<void(const float* logits, int64_t vocab)> on_logits;
  // Sees the prefill advance, for progress displays: (0, total) before the first pass, then the
  // prompt tokens fed so far after each pass (total: the tokens this call prefills).
  std::function<void(int64_t done, int64_t total)> on_prefill;
  // Sees the state after prefill passes (for the prefix cache; the argument is the state's
  // length): with snapshot_every > 0 each pass also ends at each multiple of it (in positions of
  // the state, whatever it held before) and is seen there, with 0 after every pass; the last pass
  // of the prompt is always seen.
  int64_t snapshot_every = 0;
  // A state length (> 0) where a prefill pass also ends and on_snapshot sees the state (0: none).
  int64_t snapshot_at = 0;
  std::function<void(int64_t length)> on_snapshot;
  // Sees each generated token's log-probability and the top_logprobs (0..20) most likely tokens of
  // its row, before on_token: the log-softmax of the target's logits as they are (temperature 1,
  // whatever the sampler's temperature), over the tokens the constraint allows when there is one.
  // Drafted tokens report the verify pass's row that judged them: the same row a step without
  // drafts computes.
  int top_logprobs = 0;
  std::function<void(const TokenLogprobs&)> on_logprobs;
};

// One decode step as the loop saw it (for event logs and --stats).
struct StepInfo {
  std::vector<int32_t> emitted;
  int proposed = 0, accepted = 0;
  double ms = 0;
  std::string decision;
  // Routed experts the step's pass asked for (its union, summed over MoE layers), how many had to
  // be read from drives, and the bytes read meanwhile (prefetches included).
  uint64_t union_experts = 0, missed_experts = 0, bytes_read = 0;
};

struct GenerateResult {
  std::vector<int32_t> generated;
  double prefill_ms = 0, decode_ms = 0;
  std::string stop_reason;  // "eos", "max_new" or "cancelled"
  int64_t steps = 0, proposed = 0, accepted = 0;
  // "cancelled" between two decode steps: the state holds the prompt and every generated token but
  // the last, as after a finished reply (a cancellation inside a pass leaves it half-updated).
  bool between_steps = false;
};

// Runs prompt + continuation on `state` (which may already hold a prefix).
// on_token sees each generated token as soon as it is decided; on_step sees each decode step.
GenerateResult generate(model::Target& m, model::State& state, std::span<const int32_t> prompt,
                        const GenerateOptions& opt, const std::function<void(int32_t)>& on_token = {},
                        const std::function<void(const StepInfo&)>& on_step = {});

// Greedy without drafting (the reference path).
inline GenerateResult generate_greedy(model::Target& m, model::State& state,
                                      std::span<const int32_t> prompt, GenerateOptions opt,
                                      const std::function<void(int32_t)>& on_token = {}) {
  opt.sampling = SamplingParams{};
  opt.drafter = nullptr;
  return generate(m, state, prompt, opt, on_token);
}

}  // namespace sluice::runtime
