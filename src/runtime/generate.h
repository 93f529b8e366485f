// The generation loop: prefill the prompt in passes of bounded length, then greedy decode one
// pending token per pass until EOS or max_new. The model decides every token.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/kimi.h"

namespace sluice::runtime {

struct GenerateOptions {
  int64_t max_new = 32;
  int64_t prefill_chunk = 512;  // positions per prefill pass
  bool stop_at_eos = true;
};

struct GenerateResult {
  std::vector<int32_t> generated;
  double prefill_ms = 0, decode_ms = 0;
  std::string stop_reason;  // "eos" or "max_new"
};

// Index of the largest logit; ties go to the lowest index (as torch.argmax).
int32_t argmax(const float* logits, int64_t n);

// Runs prompt + greedy continuation on `state` (which may already hold a prefix).
// on_token (optional) sees each generated token as soon as it is decided.
GenerateResult generate_greedy(model::KimiModel& m, model::SequenceState& state, std::span<const int32_t> prompt,
                               const GenerateOptions& opt, const std::function<void(int32_t)>& on_token = {});

}  // namespace sluice::runtime
