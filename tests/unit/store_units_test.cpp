// The store's units on their own: the prefetch policy (which guesses are read ahead: scoring rank
// by rank, the precision gate, the idle allowance, how far ahead) and remote fill (experts of a
// streamed install fetched from the source and their holders made local). StoreTest covers them
// composed in StreamingExperts over real drives.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "store/prefetch_policy.h"
#include "store/remote_fill.h"

namespace sluice {
namespace {

using store::PrefetchPolicy;
using Clock = std::chrono::steady_clock;

TEST(PrefetchPolicy, RefusesBadSettingsByFlag) {
  for (int ahead : {0, store::kMaxPrefetchLayers + 1}) {
    try {
      PrefetchPolicy(4, true, ahead, 0.95, false);
      ADD_FAILURE() << "accepted --prefetch-layers " << ahead;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("--prefetch-layers"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(PrefetchPolicy(4, true, 1, 1.5, false), std::exception);
  EXPECT_THROW(PrefetchPolicy(4, true, 1, -0.1, false), std::exception);
}

TEST(PrefetchPolicy, LooksFurtherAheadOnlyWhileTheDrivesIdle) {
  EXPECT_EQ(PrefetchPolicy(4, false, 3, 0.95, false).lookahead(true), 0);
  const PrefetchPolicy p(4, true, 3, 0.95, false);
  EXPECT_EQ(p.lookahead(false), 1);
  EXPECT_EQ(p.lookahead(true), 3);
  EXPECT_EQ(PrefetchPolicy(4, true, 1, 0.95, false).lookahead(true), 1);
}

// A rank earns its reads by being right: each scored guess moves its precision a fifth of the way
// to 1 or 0, so rank 0 right every time passes 0.95 at the 14th guess (1 - 0.8^14 = 0.956), while
// a rank right half the time never does. Each guess is scored once, by its own distance.
TEST(PrefetchPolicy, RanksEarnTheirReadsByBeingRight) {
  PrefetchPolicy p(3, true, 2, 0.95, false);
  const std::vector<int32_t> asked = {2, 5, 7};  // ascending, as begin() gets them
  bool scored = true;
  EXPECT_EQ(p.score(1, asked, &scored), 0u);
  EXPECT_FALSE(scored) << "no guess was made";
  for (int i = 0; i < 14; ++i) {
    EXPECT_FALSE(p.earned(1, 1, 0)) << "after " << i << " right guesses";
    // Rank 0 always right; rank 1 right on even guesses only.
    p.remember(1, 1, std::vector<int32_t>{5, i % 2 == 0 ? 7 : 9});
    EXPECT_EQ(p.score(1, asked, &scored), i % 2 == 0 ? 2u : 1u);
    EXPECT_TRUE(scored);
  }
  EXPECT_TRUE(p.earned(1, 1, 0));
  EXPECT_FALSE(p.earned(1, 1, 1));
  EXPECT_FALSE(p.earned(1, 2, 0)) << "distance 2 earns its own precision";
  EXPECT_FALSE(p.earned(0, 1, 0)) << "each layer earns its own precision";
  EXPECT_FALSE(p.earned(1, 1, 64)) << "ranks past the tracked ones never earn";
  // A scored guess is forgotten: the next request at the layer scores nothing.
  p.score(1, asked, &scored);
  EXPECT_FALSE(scored);
  // A distance-2 guess is scored too, but only the next-layer guess counts for recall.
  p.remember(2, 2, std::vector<int32_t>{5});
  EXPECT_EQ(p.score(2, asked, &scored), 0u);
  EXPECT_FALSE(scored);
  // Precision 0 reads every guess.
  EXPECT_TRUE(PrefetchPolicy(3, true, 1, 0, false).earned(2, 1, 63));
}

// --prefetch-idle: the allowance is the drives' idle time in a request's period (and what they
// read in it), for next-layer guesses handed over while they idle; nothing without the flag.
TEST(PrefetchPolicy, IdleAllowanceIsTheDrivesIdleTimeInAPeriod) {
  PrefetchPolicy p(4, true, 2, 0.95, true);
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(p.allowance(1, true).bytes, 0) << "no period measured yet";
  p.request_at(t0, 10.0, 1e9);
  p.request_at(t0 + std::chrono::milliseconds(100), 10.04, 1e9);  // idle 40 ms of 100 ms
  const PrefetchPolicy::Allowance a = p.allowance(1, true);
  EXPECT_NEAR(a.window_seconds, 0.04, 1e-9);
  EXPECT_NEAR(a.bytes, 0.04e9, 1);
  EXPECT_TRUE(a.affords(0.04e9 - 1));
  EXPECT_FALSE(a.affords(0.04e9 + 1));
  EXPECT_EQ(p.allowance(2, true).bytes, 0) << "only next-layer guesses";
  EXPECT_EQ(p.allowance(1, false).bytes, 0) << "only while the drives idle";
  PrefetchPolicy off(4, true, 2, 0.95, false);
  off.request_at(t0, 10.0, 1e9);
  off.request_at(t0 + std::chrono::milliseconds(100), 10.04, 1e9);
  EXPECT_EQ(off.allowance(1, true).bytes, 0) << "without --prefetch-idle";
}

// A source that writes byte (expert + 1) over the record and returns the record's xxh3.
class PatternSource : public store::ExpertSource {
 public:
  void adopt(store::Manifest&) override {}
  void fetch(const store::Manifest& m, int, std::span<const int32_t> experts, std::span<std::byte* const> dst,
             std::span<uint64_t> sums) override {
    if (fail) throw std::runtime_error("source down");
    for (size_t i = 0; i < experts.size(); ++i) {
      std::memset(dst[i], experts[i] + 1, m.layout.slot_bytes);
      sums[i] = XXH3_64bits(dst[i], m.layout.slot_bytes);
    }
    fetched += experts.size();
  }
  bool fail = false;
  size_t fetched = 0;
};

// Layer 1 of a 2-layer, 3-expert manifest: expert 0 held whole on two homes, expert 2 striped in
// two parts; every holder not local.
store::Manifest remote_manifest() {
  store::Manifest m;
  m.layout.slot_bytes = 8192;
  m.num_layers = 2;
  m.num_experts = 3;
  m.holders.resize(2);
  m.holders[1].resize(3);
  for (int home : {0, 1}) m.holders[1][0].push_back({.home = home, .length = 8192, .local = false});
  m.holders[1][1].push_back({.home = 0, .length = 8192, .local = false});
  m.holders[1][2].push_back({.home = 0, .length = 4096, .local = false, .at = 0});
  m.holders[1][2].push_back({.home = 1, .length = 4096, .local = false, .at = 4096});
  return m;
}

TEST(RemoteFill, FetchedExpertsBecomeLocalWithTheirSums) {
  store::Manifest m = remote_manifest();
  PatternSource source;
  std::vector<std::byte> a(8192), b(8192);
  const std::vector<int32_t> ids = {0, 2};
  std::byte* dst[] = {a.data(), b.data()};
  store::fill_from_source(&source, m, 1, ids, dst);
  EXPECT_EQ(source.fetched, 2u);
  EXPECT_EQ(a[100], std::byte{1});
  EXPECT_EQ(b[100], std::byte{3});
  for (const store::Holder& h : m.holders[1][0]) {
    EXPECT_TRUE(h.local);
    EXPECT_EQ(h.xxh3, XXH3_64bits(a.data(), 8192)) << "a whole record's holders check the record";
  }
  for (const store::Holder& h : m.holders[1][2]) {
    EXPECT_TRUE(h.local);
    EXPECT_EQ(h.xxh3, XXH3_64bits(b.data() + h.at, 4096)) << "a part's holder checks its part, at " << h.at;
  }
  EXPECT_FALSE(m.holders[1][1][0].local) << "an expert not asked for stays remote";
}

TEST(RemoteFill, FailuresLeaveTheHoldersRemote) {
  store::Manifest m = remote_manifest();
  std::vector<std::byte> a(8192);
  const std::vector<int32_t> ids = {1};
  std::byte* dst[] = {a.data()};
  try {
    store::fill_from_source(nullptr, m, 1, ids, dst);
    ADD_FAILURE() << "fetched without a source";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("expert 1 of layer 1 has no local copy yet"), std::string::npos) << e.what();
  }
  PatternSource source;
  source.fail = true;
  EXPECT_THROW(store::fill_from_source(&source, m, 1, ids, dst), std::runtime_error);
  EXPECT_FALSE(m.holders[1][1][0].local);
}

}  // namespace
}  // namespace sluice
