// The scratch a pass needs per row, which sizes prefill chunks from a memory budget
// (Target::pass_bytes_per_row, derived by hand per architecture), against what passes measure:
// the device's scratch high-water mark for a 65-row pass less a 1-row pass's, per extra row, on a
// fixture of every architecture. The figure must cover the measured one (a chunk sized by it never
// needs more scratch than the budget) and stay within 3x of it (a budget is not wasted).
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "device/cpu/cpu_device.h"
#include "model/registry.h"
#include "prompt_util.h"

namespace sluice {
namespace {

TEST(PassBytes, HandFiguresCoverTheMeasuredScratchPerRow) {
  for (const char* name : {"k3_tiny_a", "kimi_linear_a", "qwen3_a", "qwen3_moe_a", "deepseek_v3_a", "kimi_k2_int4",
                           "gpt_oss_a"}) {
    SCOPED_TRACE(name);
    device::CpuDevice dev(nullptr);
    auto t = model::load_target({.dir = testing::fixture_dir(name), .device = &dev});
    std::vector<float> logits(static_cast<size_t>(t->info().vocab_size));
    const std::vector<int32_t> ids = testing::tokens_of(65);
    auto peak_of = [&](size_t rows) {
      auto st = t->new_state();
      dev.reset_scratch_peak();
      t->forward(*st, std::span<const int32_t>(ids.data(), rows), {}, logits.data());
      return dev.scratch_peak();
    };
    peak_of(65);  // the arena grows to one chunk for the longest pass
    const double one = double(peak_of(1)), many = double(peak_of(65));
    const double measured = (many - one) / 64, figure = double(t->pass_bytes_per_row(false));
    std::printf("[pass bytes] %-14s measured %8.0f B/row, figure %8.0f (%.2fx)\n", name, measured, figure,
                figure / measured);
    EXPECT_GT(measured, 0);
    EXPECT_GE(figure, measured);
    EXPECT_LE(figure, 3 * measured);
  }
}

}  // namespace
}  // namespace sluice
