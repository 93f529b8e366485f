// The prefix cache in RAM (runtime/prefix_cache.h) through sessions, on tiny checkpoints of a
// recurrent (Kimi K3: KDA + MLA) and a cache-only (Qwen3) architecture: requests that share a
// prefix with any earlier one (not only the session's last) skip it, and the state after each
// request is bit for bit the state of a cold run, with a cold run's tokens; the budget holds;
// recurrent parts refuse a state they do not fit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/registry.h"
#include "model/state_io.h"
#include "prompt_util.h"
#include "runtime/engine.h"
#include "runtime/prefix_cache.h"

namespace sluice::runtime {
namespace {

using testing::fixture_dir;
using testing::join;
using testing::tokens_of;

class PrefixCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<Engine> engine(double gb, int64_t block) {
    EngineOptions eo;
    eo.model_dir = fixture_dir(GetParam());
    eo.prefix_cache_gb = gb;
    eo.prefix_block = block;
    return Engine::load(eo);
  }
  // Runs `prompt` on the cached session and on a fresh session of an engine without any cache:
  // the same tokens and, bit for bit, the same state afterwards. Returns the prompt tokens reused.
  size_t check(Session& s, const std::vector<int32_t>& prompt, std::vector<int32_t>* reply = nullptr) {
    const GenerateOptions go{.max_new = 5, .stop_at_eos = false};
    const auto got = s.generate(prompt, go).generated;
    auto plain = cold_->new_session(false);
    const auto want = plain->generate(prompt, go).generated;
    EXPECT_EQ(got, want) << "prompt of " << prompt.size();
    EXPECT_EQ(cold_->model().state_values(s.state()), cold_->model().state_values(plain->state()))
        << "prompt of " << prompt.size();
    if (reply) *reply = got;
    return s.reused();
  }
  void SetUp() override { cold_ = engine(0, 0); }
  std::unique_ptr<Engine> cold_;
};

TEST_P(PrefixCacheTest, AnyRecentPrefixIsReusedAndTheStateIsAColdRunsBitForBit) {
  auto e = engine(1, 4);
  auto s = e->new_session();
  const bool cut = e->model().can_truncate();
  const auto system = tokens_of(13);
  const auto a = join(system, tokens_of(6, 1)), b = join(system, tokens_of(5, 2));
  std::vector<int32_t> ra, rb;
  EXPECT_EQ(check(*s, a, &ra), 0u);
  // b shares the 13 system tokens with a: a cutting target keeps them all; a recurrent one
  // resumes from the part at 12 (parts every 4 positions) over its own state, which holds a.
  EXPECT_EQ(check(*s, b, &rb), cut ? 13u : 12u);
  // a's conversation goes on: its whole state was kept when b left it.
  const auto a2 = join(join(a, ra), tokens_of(4, 3));
  std::vector<int32_t> ra2;
  EXPECT_EQ(check(*s, a2, &ra2), a.size() + ra.size() - 1);  // the last reply token was pending
  // So does b's, after a2.
  const auto b2 = join(join(b, rb), tokens_of(3, 4));
  EXPECT_EQ(check(*s, b2), b.size() + rb.size() - 1);
  // a2 again, up to its prompt's end and then another turn: the part at a2's end (a recurrent
  // target) or a2's rows (a cutting one).
  const auto a3 = join(a2, {ra2[0] == 60 ? 61 : 60, 3});
  EXPECT_EQ(check(*s, a3), a2.size());
  // A new conversation with the same system prompt: from the system prompt's part or rows.
  EXPECT_EQ(check(*s, join(system, tokens_of(7, 6))), cut ? 13u : 12u);
  // Nothing shared: a cold prefill.
  EXPECT_EQ(check(*s, tokens_of(9, 8)), 0u);
  const auto j = e->stats_json()["prefix_cache"];
  EXPECT_GE(j["restores"].get<int64_t>(), 5);
  EXPECT_LE(j["bytes"].get<uint64_t>(), j["budget_bytes"].get<uint64_t>());
  if (!cut) {
    EXPECT_GT(j["part_loads"].get<int64_t>(), 0);
  }
  EXPECT_GT(j["whole_loads"].get<int64_t>(), 0);
}

TEST_P(PrefixCacheTest, PassEndsAloneStillResumeAtPromptEnds) {
  // Block 0: parts only where passes end (here: each prompt's end).
  auto e = engine(1, 0);
  auto s = e->new_session();
  const auto a = tokens_of(10, 1);
  std::vector<int32_t> ra;
  EXPECT_EQ(check(*s, a, &ra), 0u);
  EXPECT_EQ(check(*s, tokens_of(6, 2)), 0u);
  // Back to a's prompt with another continuation than its reply: a's prompt-end part (recurrent)
  // or a's rows (cutting).
  EXPECT_EQ(check(*s, join(a, {ra[0] == 1 ? 2 : 1, 3})), a.size());
}

TEST_P(PrefixCacheTest, APromptLeavingAnEarlierOneKeepsAPartWhereItLeaves) {
  // Parts only at pass ends (as with streamed experts): four conversations share a 70-token
  // system prompt. The second leaves the first there and keeps a part at that point, so the third
  // and fourth resume from it; a cutting target reuses the rows from the second on.
  auto e = engine(1, 0);
  auto s = e->new_session();
  const bool cut = e->model().can_truncate();
  const auto system = tokens_of(70, 3);
  std::vector<size_t> reused;
  for (int c = 0; c < 4; ++c) reused.push_back(check(*s, join(system, tokens_of(5 + c, 20 + c))));
  EXPECT_EQ(reused, (std::vector<size_t>{0, cut ? 70u : 0u, 70, 70}));
  // A few shared tokens are not worth an extra pass: no split below 64.
  auto f = engine(1, 0);
  auto t = f->new_session();
  const auto few = tokens_of(10, 4);
  for (int c = 0; c < 3; ++c) reused[size_t(c)] = check(*t, join(few, tokens_of(5 + c, 30 + c)));
  EXPECT_EQ(reused[2], cut ? 10u : 0u);
}

TEST_P(PrefixCacheTest, ABudgetOfAFewEntriesHoldsAndResultsStayExact) {
  auto requests = [&](Engine& e) {
    auto s = e.new_session();
    for (int round = 0; round < 3; ++round)
      for (int c = 0; c < 3; ++c) check(*s, join(tokens_of(9), tokens_of(4 + round, c + 10 * round)));
    return e.stats_json()["prefix_cache"];
  };
  // What these requests keep with room for all, then a third of that as the budget.
  const uint64_t all = requests(*engine(1, 2))["bytes"].get<uint64_t>();
  ASSERT_GT(all, 0u);
  const auto j = requests(*engine(double(all / 3) / 1e9, 2));
  EXPECT_LE(j["bytes"].get<uint64_t>(), all / 3);
  EXPECT_GT(j["evicted"].get<int64_t>(), 0);
  EXPECT_GT(j["restores"].get<int64_t>(), 0);
}

INSTANTIATE_TEST_SUITE_P(RecurrentAndCacheStates, PrefixCacheTest, ::testing::Values("k3_tiny_a", "qwen3_a"));

// Target::read_recurrent: over a state that holds the part's tokens it restores the part's state;
// over a shorter one, or bytes of the wrong shape, it throws and leaves the state empty.
TEST(RecurrentPart, RestoresOverItsOwnRowsAndRefusesWhatDoesNotFit) {
  auto m = model::load_target(fixture_dir("k3_tiny_a"));
  ASSERT_FALSE(m->can_truncate());
  std::vector<float> logits(size_t(m->info().vocab_size));
  const auto t = tokens_of(12, 3);
  auto at6 = m->new_state(), at12 = m->new_state();
  m->forward(*at6, std::span<const int32_t>(t).first(6), {}, logits.data());
  m->forward(*at12, t, {}, logits.data());
  model::BytesSink part;
  m->write_recurrent(*at6, part);
  model::BytesSink whole;
  m->write_state(*at6, whole);
  EXPECT_LT(part.bytes.size(), whole.bytes.size());
  {
    model::BytesSource in(part.bytes);
    m->read_recurrent(*at12, in);
  }
  EXPECT_EQ(m->state_values(*at12), m->state_values(*at6));
  auto short3 = m->new_state();
  m->forward(*short3, std::span<const int32_t>(t).first(3), {}, logits.data());
  model::BytesSource in(part.bytes);
  EXPECT_THROW(m->read_recurrent(*short3, in), Error);
  EXPECT_EQ(short3->length(), 0);
  auto again = m->new_state();
  m->forward(*again, t, {}, logits.data());
  model::BytesSource wrong(whole.bytes);  // a whole state's bytes are not a part's
  EXPECT_THROW(m->read_recurrent(*again, wrong), Error);
  EXPECT_EQ(again->length(), 0);
  auto q = model::load_target(fixture_dir("qwen3_a"));
  model::BytesSink none;
  EXPECT_THROW(q->write_recurrent(*q->new_state(), none), Error);
}

}  // namespace
}  // namespace sluice::runtime
