// What a caller asks of one forward pass, shared by every architecture.
#pragma once
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"

namespace sluice::model {

// Hidden rows a pass hands out (the DSpark drafter's context, spec §5.2): for every row of the
// pass, the output of each listed zero-based layer (the AttnRes `hidden` of §2.3 step 8, i.e. the
// running block partial prefix + mlp_out; the plain residual stream without AttnRes),
// concatenated in list order.
struct HiddenCapture {
  std::span<const int64_t> layers;
  float* rows = nullptr;  // [T, layers.size() * hidden_size]
};

// For each of num_layers layers, its slot in capture's rows or -1 (slots reuses its capacity).
// Returns how many layers are captured; throws for a layer outside 0..num_layers-1.
int64_t capture_slots(const HiddenCapture* capture, int64_t num_layers, std::vector<int>& slots);

struct PassOptions {
  bool all_logits = false;  // logits for every row; otherwise only for the last row
  bool record = false;      // keep what commit_prefix needs (draft verification)
  const HiddenCapture* capture = nullptr;  // optional; nothing is copied when null
  // Checked before each layer: once it reads true the pass throws Cancelled (a long prefill
  // chunk stops within a layer's time of a SIGINT or a client disconnect).
  const std::atomic<bool>* cancel = nullptr;
};

// Thrown by a pass whose PassOptions::cancel was set. The pass stopped between layers, so the
// state it ran on is unusable until State::reset().
struct Cancelled : Error {
  Cancelled() : Error("cancelled") {}
};

inline bool cancel_requested(const PassOptions& opt) {
  return opt.cancel && opt.cancel->load(std::memory_order_relaxed);
}

// The longest part of a long pass, its attention (MLA, GQA, the KDA recurrence), runs in slices
// of at most kAttentionSlice rows: fn(r0, n) for rows r0..r0+n-1, Cancelled thrown between
// slices once *cancel reads true, so a long prefill stops within a slice rather than a layer. A
// row's softmax attention depends only on its own visible length, and a T-row KDA call is T
// one-row calls, so slicing changes no bit.
inline constexpr int64_t kAttentionSlice = 256;
template <typename F>
void for_attention_slices(int64_t T, const std::atomic<bool>* cancel, F&& fn) {
  for (int64_t r0 = 0; r0 < T; r0 += kAttentionSlice) {
    if (r0 > 0 && cancel && cancel->load(std::memory_order_relaxed)) throw Cancelled();
    fn(r0, T - r0 < kAttentionSlice ? T - r0 : kAttentionSlice);
  }
}

}  // namespace sluice::model
