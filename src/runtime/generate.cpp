// Greedy generation with timing split into prefill (until the first token) and decode.
#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace sluice::runtime {

int32_t argmax(const float* logits, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

GenerateResult generate_greedy(model::KimiModel& m, model::SequenceState& state, std::span<const int32_t> prompt,
                               const GenerateOptions& opt, const std::function<void(int32_t)>& on_token) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) fail("the prompt is empty: give at least one token");
  if (opt.prefill_chunk < 1) fail("prefill chunk must be at least 1");
  const int64_t V = m.config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(V));
  GenerateResult r;
  auto t0 = clock::now();
  for (size_t at = 0; at < prompt.size(); at += size_t(opt.prefill_chunk)) {
    size_t n = std::min(prompt.size() - at, size_t(opt.prefill_chunk));
    m.forward(state, prompt.subspan(at, n), model::PassOptions{}, logits.data());
  }
  auto t1 = clock::now();
  r.prefill_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  r.stop_reason = "max_new";
  if (opt.max_new <= 0) return r;
  int32_t next = argmax(logits.data(), V);
  for (;;) {
    r.generated.push_back(next);
    if (on_token) on_token(next);
    if (opt.stop_at_eos && next == m.config().eos_token_id) {
      r.stop_reason = "eos";
      break;
    }
    if (int64_t(r.generated.size()) >= opt.max_new) break;
    m.forward(state, std::span<const int32_t>(&next, 1), model::PassOptions{}, logits.data());
    next = argmax(logits.data(), V);
  }
  r.decode_ms = std::chrono::duration<double, std::milli>(clock::now() - t1).count();
  return r;
}

}  // namespace sluice::runtime
