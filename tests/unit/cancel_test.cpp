// Cancellation of generation (issue 20): a flag set from any thread stops the loop between
// prefill chunks and decode steps and a pass between layers; the result holds what was generated
// before. A Session keeps its state when the stop came between decode steps (the next prompt that
// extends it continues it) and resets it when it came inside a pass; either way the next
// generation is exact.
#include <gtest/gtest.h>

#include <atomic>

#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generate.h"

namespace sluice {
namespace {

class CancelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::write_tiny_checkpoint(testing::tiny_k3_spec(), dir_ / "model");
    runtime::EngineOptions o;
    o.model_dir = dir_ / "model";
    o.experts = "resident";
    engine_ = runtime::Engine::load(o);
  }
  testing::TempDir dir_{"cancel"};
  std::unique_ptr<runtime::Engine> engine_;
  const std::vector<int32_t> prompt_{5, 9, 2, 7, 11, 3};
};

TEST_F(CancelTest, APassStopsBeforeItsFirstLayer) {
  auto& m = engine_->model();
  auto st = m.new_state();
  std::atomic<bool> cancel{true};
  std::vector<float> logits(size_t(m.info().vocab_size));
  model::PassOptions po;
  po.cancel = &cancel;
  EXPECT_THROW(m.forward(*st, prompt_, po, logits.data()), model::Cancelled);
}

TEST_F(CancelTest, SetBeforehandNothingIsGenerated) {
  std::atomic<bool> cancel{true};
  auto s = engine_->new_session(false);
  runtime::GenerateOptions opt{.max_new = 8, .stop_at_eos = false};
  opt.cancel = &cancel;
  runtime::GenerateResult r = s->generate(prompt_, opt);
  EXPECT_EQ(r.stop_reason, "cancelled");
  EXPECT_TRUE(r.generated.empty());
}

TEST_F(CancelTest, SetDuringDecodingKeepsTheTokensSoFarAndTheNextRunIsExact) {
  auto s = engine_->new_session(/*reuse_state=*/true);
  const runtime::GenerateOptions plain{.max_new = 8, .stop_at_eos = false};
  const std::vector<int32_t> want = s->generate(prompt_, plain).generated;
  ASSERT_EQ(want.size(), 8u);

  std::atomic<bool> cancel{false};
  runtime::GenerateOptions opt = plain;
  opt.cancel = &cancel;
  int seen = 0;
  runtime::GenerateResult r = s->generate(prompt_, opt, [&](int32_t) {
    if (++seen == 3) cancel.store(true);  // as a signal handler or a disconnect watcher would
  });
  EXPECT_EQ(r.stop_reason, "cancelled");
  EXPECT_TRUE(r.between_steps);
  EXPECT_EQ(r.generated, std::vector<int32_t>(want.begin(), want.begin() + 3));
  // The same prompt again (it does not extend what the state holds) prefills afresh and generates
  // the same tokens.
  EXPECT_EQ(s->generate(prompt_, plain).generated, want);
  EXPECT_EQ(s->reused(), 0u);
}

// Stopped between two decode steps, the state holds the prompt and the reply but its last token,
// as a finished reply's does: the next prompt that extends them (the next turn of a chat after
// Ctrl-C) feeds only its new tokens, and generates what a fresh session does from scratch.
TEST_F(CancelTest, StoppedBetweenStepsTheNextPromptContinuesTheState) {
  auto s = engine_->new_session(/*reuse_state=*/true);
  std::atomic<bool> cancel{false};
  runtime::GenerateOptions opt{.max_new = 8, .stop_at_eos = false};
  opt.cancel = &cancel;
  int seen = 0;
  runtime::GenerateResult r = s->generate(prompt_, opt, [&](int32_t) {
    if (++seen == 3) cancel.store(true);
  });
  ASSERT_EQ(r.stop_reason, "cancelled");
  ASSERT_EQ(r.generated.size(), 3u);
  std::vector<int32_t> next = prompt_;
  next.insert(next.end(), r.generated.begin(), r.generated.end());
  next.insert(next.end(), {13, 4, 8});
  const runtime::GenerateOptions plain{.max_new = 6, .stop_at_eos = false};
  const std::vector<int32_t> got = s->generate(next, plain).generated;
  EXPECT_EQ(s->reused(), prompt_.size() + 2) << "the prompt and the reply but its pending token";
  auto fresh = engine_->new_session(/*reuse_state=*/false);
  EXPECT_EQ(got, fresh->generate(next, plain).generated);
}

// Sets a flag on the first expert request it forwards: a cancellation arriving while the first
// MoE layer of the first prefill chunk computes.
class CancelOnFirstRequest : public store::ExpertProvider {
 public:
  CancelOnFirstRequest(store::ExpertProvider* inner, std::atomic<bool>* flag) : inner_(inner), flag_(flag) {}
  void begin(int layer, std::span<const int32_t> experts) override {
    ++begins;
    flag_->store(true);
    inner_->begin(layer, experts);
  }
  int next_ready(device::ExpertView* out) override { return inner_->next_ready(out); }
  void release(int layer) override { inner_->release(layer); }
  int begins = 0;

 private:
  store::ExpertProvider* inner_;
  std::atomic<bool>* flag_;
};

TEST_F(CancelTest, SetDuringAPrefillPassStopsAtTheNextLayer) {
  auto& m = engine_->model();
  std::atomic<bool> cancel{false};
  CancelOnFirstRequest probe(m.expert_provider(), &cancel);
  store::ExpertProvider* resident = m.expert_provider();
  m.set_expert_provider(&probe);
  auto s = engine_->new_session(false);
  runtime::GenerateOptions opt{.max_new = 8, .prefill_chunk = 2, .stop_at_eos = false};
  opt.cancel = &cancel;
  runtime::GenerateResult r = s->generate(prompt_, opt);
  m.set_expert_provider(resident);
  EXPECT_EQ(r.stop_reason, "cancelled");
  EXPECT_TRUE(r.generated.empty());
  // One MoE layer of the first chunk asked for experts; the layers after it and the other two
  // chunks never ran.
  EXPECT_EQ(probe.begins, 1);
  // And the session generates exactly afterwards.
  const runtime::GenerateOptions plain{.max_new = 4, .stop_at_eos = false};
  auto fresh = engine_->new_session(false);
  EXPECT_EQ(s->generate(prompt_, plain).generated, fresh->generate(prompt_, plain).generated);
}

}  // namespace
}  // namespace sluice
