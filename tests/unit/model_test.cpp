// Model invariants on make-tiny checkpoints of both architectures: a multi-position pass equals
// token-by-token passes bit for bit (states and logits), commit_prefix leaves exactly the state of
// the shorter run, snapshots restore, chunked prefill equals one pass.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "device/cpu/kernels.h"
#include "model/arch/kimi.h"
#include "model_test_util.h"
#include "runtime/generate.h"

namespace sluice {
namespace {

using model::KimiModel;
using model::PassOptions;

struct Arch {
  const char* name;
  model::TinySpec spec;
};

class ModelInvariants : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    spec_ = GetParam() == 0 ? testing::tiny_k3_spec() : testing::tiny_linear_spec();
    spec_.seed = 7 + uint64_t(GetParam());
    model::write_tiny_checkpoint(spec_, dir_.str());
    model_ = KimiModel::load(dir_.str());
  }
  std::vector<int32_t> tokens(int n, int salt) const {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) out.push_back(int32_t((i * 37 + salt * 11 + 5) % (spec_.vocab - 8)));
    return out;
  }
  // KDA conv windows and recurrent matrices, and the MLA latents and k_pe of every position.
  void expect_same_state(const model::State& a, const model::State& b) const {
    ASSERT_EQ(a.length(), b.length());
    EXPECT_EQ(model_->state_values(a), model_->state_values(b)) << "KDA state or MLA cache rows differ";
  }
  testing::TempDir dir_{"model"};
  model::TinySpec spec_;
  std::unique_ptr<KimiModel> model_;
};

TEST_P(ModelInvariants, MultiPositionPassEqualsTokenByToken) {
  const int64_t V = model_->config().vocab_size;
  auto ids = tokens(13, 1);
  auto batch = model_->new_state();
  std::vector<float> all(ids.size() * size_t(V));
  model_->forward(*batch, ids, PassOptions{.all_logits = true}, all.data());

  auto step = model_->new_state();
  std::vector<float> one(static_cast<size_t>(V));
  for (size_t t = 0; t < ids.size(); ++t) {
    model_->forward(*step, std::span<const int32_t>(&ids[t], 1), PassOptions{}, one.data());
    for (int64_t v = 0; v < V; ++v)
      ASSERT_EQ(one[size_t(v)], all[t * size_t(V) + size_t(v)]) << "position " << t << " logit " << v;
  }
  expect_same_state(*batch, *step);
}

TEST_P(ModelInvariants, CommitPrefixLeavesTheStateOfTheShorterRun) {
  const int64_t V = model_->config().vocab_size;
  auto prefix = tokens(6, 2);
  auto rows = tokens(5, 3);
  for (int64_t n = 0; n <= int64_t(rows.size()); ++n) {
    auto verify = model_->new_state();
    std::vector<float> logits(rows.size() * size_t(V));
    model_->forward(*verify, prefix, PassOptions{}, logits.data());
    model_->forward(*verify, rows, PassOptions{.all_logits = true, .record = true}, logits.data());
    model_->commit_prefix(*verify, n);

    auto plain = model_->new_state();
    std::vector<int32_t> kept(prefix);
    kept.insert(kept.end(), rows.begin(), rows.begin() + n);
    model_->forward(*plain, kept, PassOptions{}, logits.data());
    expect_same_state(*verify, *plain);

    // And both continue identically.
    std::vector<float> a(static_cast<size_t>(V)), b(static_cast<size_t>(V));
    auto more = tokens(3, 4);
    model_->forward(*verify, more, PassOptions{}, a.data());
    model_->forward(*plain, more, PassOptions{}, b.data());
    EXPECT_EQ(a, b) << "continuation after commit_prefix(" << n << ")";
  }
}

TEST_P(ModelInvariants, SnapshotRestoreRollsBack) {
  const int64_t V = model_->config().vocab_size;
  auto st = model_->new_state();
  std::vector<float> a(static_cast<size_t>(V)), b(static_cast<size_t>(V));
  model_->forward(*st, tokens(5, 5), PassOptions{}, a.data());
  auto snap = model_->new_snapshot();
  model_->save(*st, *snap);
  model_->forward(*st, tokens(4, 6), PassOptions{}, a.data());
  model_->restore(*st, *snap);
  EXPECT_EQ(st->length(), 5);
  auto next = tokens(2, 7);
  model_->forward(*st, next, PassOptions{}, a.data());
  auto fresh = model_->new_state();
  auto both = tokens(5, 5);
  both.insert(both.end(), next.begin(), next.end());
  model_->forward(*fresh, both, PassOptions{}, b.data());
  EXPECT_EQ(a, b);
}

TEST_P(ModelInvariants, ChunkedPrefillEqualsOnePass) {
  auto prompt = tokens(17, 8);
  runtime::GenerateOptions one{.max_new = 8, .prefill_chunk = 512, .stop_at_eos = false};
  runtime::GenerateOptions chunked{.max_new = 8, .prefill_chunk = 3, .stop_at_eos = false};
  auto s1 = model_->new_state(), s2 = model_->new_state();
  auto r1 = runtime::generate_greedy(*model_, *s1, prompt, one);
  auto r2 = runtime::generate_greedy(*model_, *s2, prompt, chunked);
  EXPECT_EQ(r1.generated, r2.generated);
  EXPECT_EQ(r1.generated.size(), 8u);
}

TEST_P(ModelInvariants, ResultsDoNotDependOnKernelIsa) {
  // Every ISA gives the same greedy tokens (the logits differ only in summation order).
  auto prompt = tokens(9, 9);
  std::vector<std::vector<int32_t>> outs;
  const char* before = device::active_isa().name;
  for (const device::Isa* isa : device::available_isas()) {
    device::set_active_isa(isa->name);
    auto st = model_->new_state();
    outs.push_back(runtime::generate_greedy(*model_, *st, prompt, {.max_new = 6, .stop_at_eos = false}).generated);
  }
  device::set_active_isa(before);
  for (size_t i = 1; i < outs.size(); ++i) EXPECT_EQ(outs[0], outs[i]) << device::available_isas()[i]->name;
}

INSTANTIATE_TEST_SUITE_P(Arch, ModelInvariants, ::testing::Values(0, 1),
                         [](const ::testing::TestParamInfo<int>& i) { return i.param == 0 ? "kimi_k3" : "kimi_linear"; });

}  // namespace
}  // namespace sluice
