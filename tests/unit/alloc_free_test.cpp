// Nothing allocates per token: after a warm-up that reaches the sizes a decode step and a verify
// pass need, a decode step (one-row pass) and a verify pass (a recorded multi-row pass and its
// commit_prefix) make no heap allocation and no arena allocation, for every architecture, with
// resident and with streamed experts. Allocations are counted by replacing the global operator
// new of this test binary (every thread, so the thread pool's workers count too) and by the
// arena's own counter.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "core/arena.h"
#include "model/arch/kimi.h"
#include "model/arch/qwen3.h"
#include "model/registry.h"
#include "model/tiny_checkpoint.h"
#include "model_test_util.h"

namespace {
std::atomic<uint64_t> g_news{0};
}  // namespace

// The replacements pair malloc with free; GCC cannot see that they replace each other.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void* operator new(size_t n, std::align_val_t a) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  const size_t al = size_t(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n, std::align_val_t a) { return operator new(n, a); }
// The nothrow forms too (std::stable_sort's temporary buffer uses one): the library's own would
// allocate from its heap while the deletes above free with std::free. A malloc-based heap hides the
// mismatch; AddressSanitizer's does not (alloc-dealloc-mismatch in every test of this binary).
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  const size_t al = size_t(a);
  return std::aligned_alloc(al, (n + al - 1) / al * al);
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t& t) noexcept { return operator new(n, a, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }

namespace sluice {
namespace {

struct Counts {
  uint64_t news, arenas;
};
Counts now() { return {g_news.load(), touched_allocations()}; }

// Warms the state up, then counts what one decode step and one verify pass allocate.
void expect_no_allocation(model::Target& m, const std::string& label) {
  const int64_t V = m.info().vocab_size;
  std::vector<float> logits(size_t(8 * V));
  std::vector<int32_t> prompt;
  for (int i = 0; i < 20; ++i) prompt.push_back(int32_t((i * 37 + 5) % (V - 8)));
  const std::vector<int32_t> one = {7}, rows = {3, 9, 4, 11};
  auto st = m.new_state();
  m.forward(*st, prompt, {}, logits.data());
  for (int w = 0; w < 2; ++w) {
    m.forward(*st, one, {}, logits.data());
    m.forward(*st, rows, {.all_logits = true, .record = true}, logits.data());
    m.commit_prefix(*st, 2);
  }

  const Counts a = now();
  m.forward(*st, one, {}, logits.data());
  const Counts b = now();
  EXPECT_EQ(b.news - a.news, 0u) << label << ": a decode step allocated on the heap";
  EXPECT_EQ(b.arenas - a.arenas, 0u) << label << ": a decode step allocated an arena";

  m.forward(*st, rows, {.all_logits = true, .record = true}, logits.data());
  m.commit_prefix(*st, 1);
  const Counts c = now();
  EXPECT_EQ(c.news - b.news, 0u) << label << ": a verify pass allocated on the heap";
  EXPECT_EQ(c.arenas - b.arenas, 0u) << label << ": a verify pass allocated an arena";
}

TEST(AllocationFree, KimiK3DecodeAndVerify) {
  testing::TempDir dir("alloc-k3");
  model::write_tiny_checkpoint(testing::tiny_k3_spec(), dir / "m");
  auto m = model::load_target(dir / "m");
  expect_no_allocation(*m, "kimi_k3");
}

TEST(AllocationFree, KimiLinearDecodeAndVerify) {
  testing::TempDir dir("alloc-kl");
  model::write_tiny_checkpoint(testing::tiny_linear_spec(), dir / "m");
  auto m = model::load_target(dir / "m");
  expect_no_allocation(*m, "kimi_linear");
}

TEST(AllocationFree, Qwen3DecodeAndVerify) {
  testing::TempDir dir("alloc-q3");
  model::write_tiny_qwen3_checkpoint({}, dir / "m");
  auto m = model::load_target(dir / "m");
  expect_no_allocation(*m, "qwen3");
}

// The MoE architectures of issue 17, resident (their committed tiny checkpoints): DeepSeek-V3 with
// FP8 weights and the FP8 SIMD product's activation buffer, gpt-oss's interleaved experts, Qwen3-MoE,
// Kimi-K2-Thinking's INT4 experts.
TEST(AllocationFree, MoeArchitecturesDecodeAndVerify) {
  for (const char* f : {"qwen3_moe_b", "gpt_oss_b", "deepseek_v3_a", "kimi_k2_b", "kimi_k2_int4"}) {
    auto m = model::load_target(std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/" + f);
    expect_no_allocation(*m, f);
  }
}

// Experts streamed from two homes through a cache that holds them all once read: a step whose
// experts are in RAM allocates nothing. (A miss queues a read job in the reader, which allocates
// its bookkeeping; the store issue reworks the reader.)
TEST(AllocationFree, StreamedExpertsInRamDecodeAndVerify) {
  testing::TempDir dir("alloc-stream");
  model::write_tiny_checkpoint(testing::streamed_tiny_spec(), dir / "m");
  auto engine = testing::streamed_engine(dir, dir / "m", 0.05);
  ASSERT_TRUE(engine->streaming());
  // Every expert read once, so that no pass (nor the next-layer prefetch) misses.
  const store::ExpertBank& bank = *engine->model().expert_bank();
  std::vector<int32_t> all;
  for (int32_t e = 0; e < int32_t(bank.num_experts); ++e) all.push_back(e);
  for (int layer : bank.moe_layers) {
    engine->store()->begin(layer, all);
    device::ExpertView v;
    while (engine->store()->next_ready(&v) >= 0) {
    }
    engine->store()->release(layer);
  }
  expect_no_allocation(engine->model(), "kimi_k3 streamed, experts in RAM");
}

TEST(AllocationFree, TheCounterSeesAllocations) {
  // The check above can fail: a vector growing inside the counted window is seen.
  const Counts a = now();
  std::vector<int>* v = new std::vector<int>(1000);
  delete v;
  EXPECT_GE(now().news - a.news, 2u);
}

}  // namespace
}  // namespace sluice
