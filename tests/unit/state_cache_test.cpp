// The state cache on disk (runtime/state_cache.h) on tiny checkpoints of a recurrent (Kimi) and a
// cache-only (Qwen3) architecture: a saved state restored by another cache object (a restart) is
// bit-identical to a cold prefill; the longest usable prefix wins (any shorter prefix of an entry
// when the state can be cut back); truncated, corrupt and foreign entries are deleted with one
// warning and never restored; eviction by recency under the byte budget; and sessions of a
// restarted engine continue from the saved state with the tokens of a cold run.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/registry.h"
#include "model_test_util.h"
#include "prompt_util.h"
#include "runtime/engine.h"
#include "runtime/state_cache.h"

namespace sluice::runtime {
namespace {

using testing::fixture_dir;
using testing::join;
using testing::tokens_of;

namespace fs = std::filesystem;

class StateCacheTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    m_ = model::load_target(fixture_dir(GetParam()));
    key_ = state_cache_key(fixture_dir(GetParam()), m_->device().name());
  }
  std::unique_ptr<StateCache> open(uint64_t budget = uint64_t(1) << 30) {
    StateCacheOptions o{.dir = dir_.str(), .budget_bytes = budget,
                        .warn = [this](const std::string& w) { warnings_.push_back(w); }};
    return std::make_unique<StateCache>(o, key_);
  }
  // A state that consumed `tokens`.
  std::unique_ptr<model::State> run(std::span<const int32_t> tokens) {
    auto st = m_->new_state();
    std::vector<float> logits(size_t(m_->info().vocab_size));
    if (!tokens.empty()) m_->forward(*st, tokens, {}, logits.data());
    return st;
  }
  void save(StateCache& c, const std::vector<int32_t>& tape) { c.save(*m_, *run(tape), tape); }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_.str())) out.push_back(e.path().filename().string());
    return out;
  }
  std::string only_file() const {
    auto f = files();
    EXPECT_EQ(f.size(), 1u);
    return f.empty() ? "" : dir_ / f[0];
  }

  testing::TempDir dir_{"state-cache"};
  std::unique_ptr<model::Target> m_;
  std::string key_;
  std::vector<std::string> warnings_;
};

TEST_P(StateCacheTest, ASavedStateSurvivesARestartBitForBit) {
  const auto tape = tokens_of(10);
  save(*open(), tape);
  EXPECT_EQ(files().size(), 1u);
  auto cache = open();  // a new process would see the same
  EXPECT_EQ(cache->entries(), 1u);
  auto st = m_->new_state();
  EXPECT_EQ(cache->restore(*m_, *st, join(tape, {3, 4, 5}), 0), tape.size());
  EXPECT_EQ(m_->state_values(*st), m_->state_values(*run(tape)));
  EXPECT_EQ(cache->counters().restores, 1);
  EXPECT_TRUE(warnings_.empty());
  // Nothing past what the caller already has: untouched.
  auto other = run(tokens_of(3, 1));
  const auto before = m_->state_values(*other);
  EXPECT_EQ(cache->restore(*m_, *other, join(tape, {3}), tape.size()), 0u);
  EXPECT_EQ(m_->state_values(*other), before);
}

TEST_P(StateCacheTest, TheLongestUsablePrefixWins) {
  const auto tape = tokens_of(12, 2);
  const std::vector<int32_t> p4(tape.begin(), tape.begin() + 4), p8(tape.begin(), tape.begin() + 8);
  auto cache = open();
  save(*cache, p4);
  save(*cache, p8);
  const bool cut = m_->can_truncate();
  // A cutting target keeps only the longer entry: it stands for the shorter one.
  EXPECT_EQ(cache->entries(), cut ? 1u : 2u);
  auto st = m_->new_state();
  EXPECT_EQ(cache->restore(*m_, *st, tape, 0), 8u);
  EXPECT_EQ(m_->state_values(*st), m_->state_values(*run(p8)));
  // Diverging after 6 tokens: the 4-token entry, or 6 rows of the 8-token one.
  const auto diverging = join(std::vector<int32_t>(tape.begin(), tape.begin() + 6), {90, 91});
  const size_t want = cut ? 6 : 4;
  EXPECT_EQ(cache->restore(*m_, *st, diverging, 0), want);
  EXPECT_EQ(m_->state_values(*st), m_->state_values(*run(std::span<const int32_t>(diverging.data(), want))));
  // The prompt is exactly an entry: at least one token must be left to feed.
  EXPECT_EQ(cache->restore(*m_, *st, p8, 0), cut ? 7u : 4u);
  EXPECT_EQ(cache->restore(*m_, *st, tokens_of(5, 7), 0), 0u);
  EXPECT_TRUE(warnings_.empty());
}

// A recurrent target's part of a shared prefix, read over a whole entry that holds those tokens
// too, gives a prompt that shares only that prefix the state of it after a restart, bit for bit; a
// target that cuts back needs no part (the whole entry, cut back, gives as much).
TEST_P(StateCacheTest, APartOverAWholeEntryResumesASharedPrefixAfterARestart) {
  const bool cut = m_->can_truncate();
  const auto system = tokens_of(12, 5);
  const auto a = join(system, {40, 41, 42}), b = join(system, {50, 51});
  {
    auto cache = open();
    save(*cache, a);
    cache->save_part(*m_, *run(system), system);
    EXPECT_EQ(cache->counters().parts_saved, cut ? 0 : 1);
  }
  EXPECT_EQ(files().size(), cut ? 1u : 2u);
  auto cache = open();  // a restart
  EXPECT_EQ(cache->usable(*m_, b), system.size());
  auto st = run(tokens_of(3, 9));
  EXPECT_EQ(cache->restore(*m_, *st, b, 0), system.size());
  EXPECT_EQ(m_->state_values(*st), m_->state_values(*run(system)));
  EXPECT_EQ(cache->counters().part_restores, cut ? 0 : 1);
  EXPECT_EQ(cache->shared_prefix(b), system.size());
  // The part alone holds no cache rows: without a whole entry of those tokens it gives nothing,
  // and a prompt it is not a prefix of is not served by it.
  const auto other = join(tokens_of(12, 6), {50, 51});
  EXPECT_EQ(cache->restore(*m_, *st, other, 0), 0u);
  if (!cut) {
    for (const std::string& f : files())
      if (f.ends_with(".state")) fs::remove(dir_ / f);
    auto without = open();
    EXPECT_EQ(without->entries(), 1u);
    EXPECT_EQ(without->usable(*m_, b), 0u);
    auto untouched = run(tokens_of(3, 9));
    const auto before = m_->state_values(*untouched);
    EXPECT_EQ(without->restore(*m_, *untouched, b, 0), 0u);
    EXPECT_EQ(m_->state_values(*untouched), before);
  }
  EXPECT_TRUE(warnings_.empty());
}

// A corrupt part is discarded with one warning; the state it was read over is reset, never used.
TEST_P(StateCacheTest, ACorruptPartIsDiscardedWithOneWarning) {
  if (m_->can_truncate()) GTEST_SKIP() << "a target that cuts back keeps no parts";
  const auto system = tokens_of(12, 5);
  {
    auto cache = open();
    save(*cache, join(system, {40, 41}));
    cache->save_part(*m_, *run(system), system);
  }
  std::string part;
  for (const std::string& f : files())
    if (f.ends_with(".part")) part = dir_ / f;
  ASSERT_FALSE(part.empty());
  {
    std::fstream f(part, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(fs::file_size(part) - 40));
    char c = 0;
    f.read(&c, 1);
    f.seekp(std::streamoff(fs::file_size(part) - 40));
    c ^= 1;
    f.write(&c, 1);
  }
  auto cache = open();
  EXPECT_EQ(cache->entries(), 2u);
  auto st = m_->new_state();
  // The part fails its checksum; the whole entry alone is not a prefix of this prompt.
  EXPECT_EQ(cache->restore(*m_, *st, join(system, {50, 51}), 0), 0u);
  EXPECT_EQ(st->length(), 0);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("checksum mismatch"), std::string::npos) << warnings_[0];
  EXPECT_EQ(cache->entries(), 1u);
  EXPECT_FALSE(fs::exists(part));
  // A whole state's file renamed to a part's name is refused at the scan.
  warnings_.clear();
  std::string whole;
  for (const std::string& f : files())
    if (f.ends_with(".state")) whole = f;
  fs::copy_file(dir_ / whole, dir_ / (whole.substr(0, whole.size() - 6) + ".part"));
  EXPECT_EQ(open()->entries(), 1u);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("not a recurrent part"), std::string::npos) << warnings_[0];
}

TEST_P(StateCacheTest, CorruptTruncatedAndForeignEntriesAreDiscardedWithOneWarning) {
  const auto tape = tokens_of(9, 3);
  // Corrupt: one byte of the state flipped; the size is right, so only the checksum can tell.
  save(*open(), tape);
  const std::string file = only_file();
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(fs::file_size(file) / 2));
    char c = 0;
    f.read(&c, 1);
    f.seekp(std::streamoff(fs::file_size(file) / 2));
    c ^= 1;
    f.write(&c, 1);
  }
  {
    auto cache = open();
    EXPECT_EQ(cache->entries(), 1u);
    auto st = run(tokens_of(4, 5));
    EXPECT_EQ(cache->restore(*m_, *st, join(tape, {1}), 0), 0u);
    EXPECT_EQ(st->length(), 0);  // half-read: reset, never used
    ASSERT_EQ(warnings_.size(), 1u);
    EXPECT_NE(warnings_[0].find("checksum mismatch"), std::string::npos) << warnings_[0];
    EXPECT_NE(warnings_[0].find("discarded"), std::string::npos) << warnings_[0];
    EXPECT_EQ(cache->entries(), 0u);
    EXPECT_TRUE(files().empty());
  }
  // Truncated: found when the directory is scanned.
  warnings_.clear();
  save(*open(), tape);
  fs::resize_file(only_file(), fs::file_size(only_file()) - 5);
  EXPECT_EQ(open()->entries(), 0u);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_TRUE(files().empty());
  // Foreign: another model's entries are not this one's (left alone); one renamed into this one's
  // name is discarded.
  warnings_.clear();
  {
    StateCacheOptions o{.dir = dir_.str(), .budget_bytes = uint64_t(1) << 30, .warn = [](const std::string&) {}};
    StateCache theirs(o, "0123456789abcdef");
    theirs.save(*m_, *run(tape), tape);
  }
  const std::string theirs_file = only_file();
  EXPECT_EQ(open()->entries(), 0u);
  EXPECT_TRUE(warnings_.empty());
  EXPECT_TRUE(fs::exists(theirs_file));
  const std::string ours = dir_ / (key_ + theirs_file.substr(theirs_file.rfind('-')));
  fs::rename(theirs_file, ours);
  EXPECT_EQ(open()->entries(), 0u);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("another model"), std::string::npos) << warnings_[0];
  // Not an entry at all, and a dead writer's temporary file.
  warnings_.clear();
  std::ofstream(dir_ / (key_ + "-0000000000000000.state")) << "not a state";
  std::ofstream(dir_ / ("." + key_ + "-0000000000000001.state.tmp-999999999")) << "half";
  EXPECT_EQ(open()->entries(), 0u);
  EXPECT_EQ(warnings_.size(), 1u);
  EXPECT_TRUE(files().empty());
}

TEST_P(StateCacheTest, EvictsTheLeastRecentlyUsedUnderTheBudget) {
  const auto a = tokens_of(10, 1), b = tokens_of(10, 2), c = tokens_of(10, 3);
  uint64_t one = 0;
  {
    auto probe = open();
    save(*probe, a);
    one = probe->bytes();
  }
  fs::remove_all(dir_.str());
  fs::create_directories(dir_.str());
  auto cache = open(one * 5 / 2);
  save(*cache, a);
  save(*cache, b);
  auto st = m_->new_state();
  EXPECT_EQ(cache->restore(*m_, *st, join(a, {1}), 0), a.size());  // a is now more recent than b
  save(*cache, c);
  EXPECT_EQ(cache->entries(), 2u);
  EXPECT_EQ(cache->counters().evicted, 1);
  EXPECT_EQ(cache->restore(*m_, *st, join(b, {1}), 0), 0u);
  EXPECT_EQ(cache->restore(*m_, *st, join(a, {1}), 0), a.size());
  EXPECT_LE(cache->bytes(), one * 5 / 2);
  // Recency survives a restart (file times): after using c, b's replacement evicts a.
  {
    auto again = open(one * 5 / 2);
    EXPECT_EQ(again->restore(*m_, *st, join(c, {1}), 0), c.size());
    save(*again, b);
    EXPECT_EQ(again->restore(*m_, *st, join(a, {1}), 0), 0u);
    EXPECT_EQ(again->restore(*m_, *st, join(c, {1}), 0), c.size());
  }
  // A state larger than the whole budget is not saved (one warning, however often).
  auto tiny = open(one / 2);
  EXPECT_EQ(tiny->entries(), 0u);  // what was there is evicted down to the budget
  save(*tiny, a);
  save(*tiny, b);
  EXPECT_EQ(tiny->entries(), 0u);
  EXPECT_EQ(warnings_.size(), 1u);
  EXPECT_TRUE(files().empty());
}

// Sessions: a restarted engine continues a conversation from the saved state, with a cold run's
// tokens; usage counts the restored tokens as reused.
TEST_P(StateCacheTest, ARestartedEngineContinuesWithTheTokensOfAColdRun) {
  EngineOptions eo;
  eo.model_dir = fixture_dir(GetParam());
  const GenerateOptions go{.max_new = 6, .stop_at_eos = false};
  const auto first = tokens_of(11, 4);
  std::vector<int32_t> tape;
  {
    EngineOptions with = eo;
    with.state_cache_dir = dir_.str();
    auto engine = Engine::load(with);
    auto session = engine->new_session();
    const auto gen = session->generate(first, go).generated;
    tape = join(first, gen);
    EXPECT_EQ(engine->state_cache()->entries(), 1u);
    EXPECT_EQ(engine->stats_json()["state_cache"]["saves"], 1);
  }
  const auto second = join(tape, {5, 6, 7});
  auto cold = Engine::load(eo);
  const auto want = cold->new_session()->generate(second, go).generated;

  EngineOptions with = eo;
  with.state_cache_dir = dir_.str();
  auto engine = Engine::load(with);
  auto session = engine->new_session();
  EXPECT_EQ(session->generate(second, go).generated, want);
  EXPECT_EQ(session->reused(), tape.size() - 1);  // the last reply token was pending, not fed
  EXPECT_EQ(session->restored(), tape.size() - 1);
  // Without state reuse the cache is not consulted.
  auto plain = engine->new_session(false);
  EXPECT_EQ(plain->generate(second, go).generated, want);
  EXPECT_EQ(plain->reused(), 0u);
  // In memory, a cutting target keeps what a diverging prompt shares with its state.
  const auto diverging = join(std::vector<int32_t>(second.begin(), second.begin() + 7), {44, 45});
  const auto want2 = cold->new_session()->generate(diverging, go).generated;
  EXPECT_EQ(session->generate(diverging, go).generated, want2);
  EXPECT_EQ(session->reused(), m_->can_truncate() ? 7u : 0u);
  EXPECT_TRUE(warnings_.empty());
}

// Sessions of restarted engines: four conversations that share a long system prompt. The second
// finds nothing to resume (a recurrent target) but keeps a part where it leaves the first; the
// third and later resume there, with a cold run's tokens.
TEST_P(StateCacheTest, RestartedEnginesResumeAfterASharedSystemPrompt) {
  EngineOptions eo;
  eo.model_dir = fixture_dir(GetParam());
  const GenerateOptions go{.max_new = 4, .stop_at_eos = false};
  const bool cut = m_->can_truncate();
  const auto system = tokens_of(80, 8);
  auto cold = Engine::load(eo);
  EngineOptions with = eo;
  with.state_cache_dir = dir_.str();
  const std::vector<std::vector<int32_t>> questions = {{60, 61, 62}, {70, 71}, {80, 81, 82, 83}, {90}};
  for (size_t q = 0; q < questions.size(); ++q) {
    SCOPED_TRACE(cat("conversation ", q));
    const auto prompt = join(system, questions[q]);
    auto engine = Engine::load(with);  // each one a restart
    auto session = engine->new_session();
    EXPECT_EQ(session->generate(prompt, go).generated, cold->new_session()->generate(prompt, go).generated);
    const size_t want = q == 0 ? 0 : (cut || q >= 2) ? system.size() : 0;
    EXPECT_EQ(session->restored(), want);
    EXPECT_EQ(engine->stats_json()["state_cache"]["parts_saved"], !cut && q == 1 ? 1 : 0);
  }
  EXPECT_TRUE(warnings_.empty());
}

INSTANTIATE_TEST_SUITE_P(RecurrentAndCacheStates, StateCacheTest, ::testing::Values("k3_tiny_a", "qwen3_a"));

}  // namespace
}  // namespace sluice::runtime
