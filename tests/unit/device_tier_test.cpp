// The device tier's lease and recency rules, on the CPU device's emulated tier memory (copies are
// memcpy) in front of a provider whose experts are host buffers with a pattern per expert: hits
// and misses, what the inner provider is asked for, least-recently-used eviction, a slot never
// reused while its lease is open, misses passed through when every slot is leased, and prefetch
// hints that skip experts already on the device.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "device/cpu/cpu_device.h"
#include "store/device_tier.h"
#include "store/hybrid_plan.h"
#include "model_test_util.h"

namespace sluice {
namespace {

constexpr int kLayers = 2, kExperts = 6;
constexpr int64_t kRows = 8, kCols = 16;  // F32 gate, up, down of 512 bytes each

// Experts in host memory: every float of expert (l, e) is 100·l + e.
class HostExperts : public store::ExpertProvider {
 public:
  HostExperts() : bytes_(size_t(kLayers * kExperts) * 3 * kRows * kCols) {
    for (int l = 0; l < kLayers; ++l)
      for (int e = 0; e < kExperts; ++e)
        for (int64_t i = 0; i < 3 * kRows * kCols; ++i) at(l, e)[i] = float(100 * l + e);
  }
  void begin(int layer, std::span<const int32_t> experts) override {
    EXPECT_FALSE(open_) << "a lease is already open";
    open_ = true;
    layer_ = layer;
    asked.emplace_back(experts.begin(), experts.end());
    order_.assign(experts.begin(), experts.end());
    next_ = 0;
  }
  int next_ready(device::ExpertView* out) override {
    if (next_ >= order_.size()) return -1;
    view(layer_, order_[next_], out);
    return int(next_++);
  }
  void release(int layer) override {
    EXPECT_TRUE(open_);
    EXPECT_EQ(layer, layer_);
    open_ = false;
    ++releases;
  }
  void prefetch(int, std::span<const int32_t> experts, int) override {
    prefetched.emplace_back(experts.begin(), experts.end());
  }
  // Resident: every expert but those in `absent` (no read in flight is simulated: absent = not in RAM).
  bool pin_resident(int layer, int expert, device::ExpertView* out) override {
    if (!resident) return false;
    for (const auto& a : absent)
      if (a == std::pair{layer, expert}) return false;
    pins[size_t(layer * kExperts + expert)] += 1;
    view(layer, expert, out);
    return true;
  }
  void unpin(int layer, int expert) override {
    EXPECT_GT(pins[size_t(layer * kExperts + expert)], 0) << "unpinned more often than pinned";
    pins[size_t(layer * kExperts + expert)] -= 1;
  }
  void view(int l, int e, device::ExpertView* out) {
    float* p = at(l, e);
    device::Weight w{.type = device::WeightType::F32, .rows = kRows, .cols = kCols};
    out->gate = out->up = out->down = w;
    out->gate.data = p;
    out->up.data = p + kRows * kCols;
    out->down.data = p + 2 * kRows * kCols;
  }
  float* at(int l, int e) { return bytes_.data() + size_t(l * kExperts + e) * 3 * kRows * kCols; }
  int pinned() const {
    int n = 0;
    for (int p : pins) n += p;
    return n;
  }

  std::vector<std::vector<int32_t>> asked, prefetched;
  int releases = 0;
  bool resident = false;
  std::vector<std::pair<int, int>> absent;
  std::vector<int> pins = std::vector<int>(size_t(kLayers * kExperts), 0);

 private:
  std::vector<float> bytes_;
  std::vector<int32_t> order_;
  size_t next_ = 0;
  int layer_ = -1;
  bool open_ = false;
};

// Every float of the view's three weights is `value`.
bool holds(const device::ExpertView& v, float value) {
  for (const device::Weight* w : {&v.gate, &v.up, &v.down})
    for (int64_t i = 0; i < kRows * kCols; ++i)
      if (static_cast<const float*>(w->data)[i] != value) return false;
  return true;
}

// Runs one lease over `experts` of `layer`: the views in begin's order, checked after every
// expert was handed out (none overwritten by a later miss of the same lease).
std::vector<device::ExpertView> lease(store::DeviceTier& tier, int layer, std::vector<int32_t> experts) {
  tier.begin(layer, experts);
  std::vector<device::ExpertView> views(experts.size());
  device::ExpertView v;
  size_t n = 0;
  for (int got; (got = tier.next_ready(&v)) >= 0; ++n) views[size_t(got)] = v;
  EXPECT_EQ(n, experts.size());
  for (size_t i = 0; i < experts.size(); ++i)
    EXPECT_TRUE(holds(views[i], float(100 * layer + experts[i]))) << "expert " << experts[i] << " of layer " << layer;
  tier.release(layer);
  return views;
}

TEST(DeviceTier, KeepsRecentExpertsAndNeverReusesALeasedSlot) {
  device::CpuDevice dev(nullptr);
  HostExperts host;
  const uint64_t slot = 3 * kRows * kCols * 4;  // three 512-byte pieces, each 256-aligned already
  store::DeviceTier tier(dev, host, 2 * slot, kLayers, kExperts);

  // Two slots, three experts: two are copied, the third passes through from host memory.
  auto v = lease(tier, 0, {1, 2, 3});
  EXPECT_EQ(tier.counters().slots, 2u);
  EXPECT_EQ(tier.counters().slot_bytes, slot);
  EXPECT_EQ(v[0].gate.place, device::Place::Device);
  EXPECT_EQ(v[1].gate.place, device::Place::Device);
  EXPECT_EQ(v[2].gate.place, device::Place::Host);
  EXPECT_EQ(v[2].gate.data, host.at(0, 3));
  EXPECT_EQ(tier.counters().copies, 2u);
  EXPECT_EQ(tier.counters().passthrough, 1u);
  EXPECT_EQ(host.releases, 1);

  // Expert 2 is a hit (only 4 is asked of the RAM store) and 4 takes the least recent slot, 1's.
  v = lease(tier, 0, {2, 4});
  ASSERT_EQ(host.asked.size(), 2u);
  EXPECT_EQ(host.asked[1], std::vector<int32_t>{4});
  EXPECT_EQ(tier.counters().hits, 1u);
  EXPECT_EQ(tier.counters().evictions, 1u);
  EXPECT_EQ(host.releases, 2);

  // All hits: the RAM store is not asked and its lease never opened.
  lease(tier, 0, {2, 4});
  EXPECT_EQ(host.asked.size(), 2u);
  EXPECT_EQ(host.releases, 2);
  EXPECT_EQ(tier.counters().hits, 3u);

  // The same expert id of another layer is another expert: it takes 2's slot (2 was used before 4
  // in the last lease), and 1, evicted before, comes back into 4's.
  lease(tier, 1, {2});
  lease(tier, 0, {1});
  ASSERT_EQ(host.asked.size(), 4u);
  EXPECT_EQ(host.asked[2], std::vector<int32_t>{2});
  EXPECT_EQ(host.asked[3], std::vector<int32_t>{1});
  EXPECT_EQ(tier.counters().evictions, 3u);

  // Prefetch hints name only experts not on the device (of layer 0 it holds only 1 now).
  tier.prefetch(0, std::vector<int32_t>{4, 5, 1, 0}, 1);
  ASSERT_EQ(host.prefetched.size(), 1u);
  EXPECT_EQ(host.prefetched[0], (std::vector<int32_t>{4, 5, 0}));
  EXPECT_EQ(tier.counters().requests, 9u);
}

// Guesses at the next layer are copied ahead when a lease is released, from RAM only (an expert
// the RAM store does not hold is not read for it), never over a third of the slots; a right
// guess is a hit of the next lease, a wrong one is evicted as wasted; the RAM copies stay pinned
// until the next release and are unpinned exactly once.
TEST(DeviceTier, CopiesGuessesAheadFromRamAndScoresThem) {
  device::CpuDevice dev(nullptr);
  HostExperts host;
  host.resident = true;
  host.absent = {{1, 5}};
  const uint64_t slot = 3 * kRows * kCols * 4;
  store::DeviceTier tier(dev, host, 6 * slot, kLayers, kExperts, 0, /*ahead_precision=*/0);

  lease(tier, 0, {0});  // no guess yet: nothing ahead
  EXPECT_EQ(tier.counters().ahead, 0u);
  tier.prefetch(1, std::vector<int32_t>{5, 2, 3, 4}, 1);
  lease(tier, 0, {1});
  // 5 is not in RAM; 2 and 3 fill the budget of 6 / 3 slots; 4 waits for a read it never gets.
  EXPECT_EQ(tier.counters().ahead, 2u);
  EXPECT_EQ(host.pinned(), 2);
  EXPECT_EQ(host.pins[size_t(1 * kExperts + 2)], 1);
  EXPECT_EQ(host.pins[size_t(1 * kExperts + 3)], 1);

  // Layer 1 asks for 2 (a hit made ahead) and 4: only 4 is asked of the RAM store.
  auto v = lease(tier, 1, {2, 4});
  ASSERT_EQ(host.asked.size(), 3u);
  EXPECT_EQ(host.asked[2], std::vector<int32_t>{4});
  EXPECT_EQ(v[0].gate.place, device::Place::Device);
  EXPECT_EQ(tier.counters().ahead_used, 1u);
  EXPECT_EQ(host.pinned(), 0);  // unpinned at that release, once

  // Layer 0's guesses come from no one now: the next releases copy nothing ahead.
  lease(tier, 0, {1});
  EXPECT_EQ(tier.counters().ahead, 2u);
  // Filling every slot with new experts evicts 3, which nobody asked for: wasted.
  lease(tier, 0, {2, 3, 4, 5});
  lease(tier, 1, {0, 1});
  EXPECT_EQ(tier.counters().ahead_wasted, 1u);
  EXPECT_EQ(tier.counters().ahead_used, 1u);
}

// With a precision bar, a guess is copied ahead only once guesses of its rank at that layer have
// been right often enough: an average that moves a fifth of the way per guess reaches 0.95 after
// 14 right guesses, so the 15th is the first copied.
TEST(DeviceTier, CopiesAheadOnlyGuessesOfRanksThatHaveBeenRight) {
  device::CpuDevice dev(nullptr);
  HostExperts host;
  host.resident = true;
  const uint64_t slot = 3 * kRows * kCols * 4;
  store::DeviceTier tier(dev, host, 6 * slot, kLayers, kExperts, 0, 0.95);
  for (int round = 1; round <= 15; ++round) {
    tier.prefetch(1, std::vector<int32_t>{2}, 1);
    lease(tier, 0, {0, 1, 2, 3, 4, 5});  // fills every slot, so layer 1's expert 2 is never kept
    EXPECT_EQ(tier.counters().ahead, round == 15 ? 1u : 0u) << "round " << round;
    lease(tier, 1, {2});
  }
  EXPECT_EQ(tier.counters().ahead_used, 1u);
  EXPECT_EQ(host.pinned(), 0);
}

TEST(DeviceTier, ZeroBudgetPassesEveryExpertThrough) {
  device::CpuDevice dev(nullptr);
  HostExperts host;
  store::DeviceTier tier(dev, host, 100, kLayers, kExperts);  // below one slot
  auto v = lease(tier, 1, {0, 5});
  EXPECT_EQ(tier.counters().slots, 0u);
  EXPECT_EQ(tier.counters().passthrough, 2u);
  EXPECT_EQ(v[1].down.data, host.at(1, 5) + 2 * kRows * kCols);
  lease(tier, 1, {0, 5});
  EXPECT_EQ(tier.counters().hits, 0u);
  EXPECT_EQ(host.releases, 2);
}

// The host's share: per layer round(share x experts) experts, chosen by (layer, expert) alone, are
// handed out from host memory marked compute_on_host and never copied, whatever the tier holds.
TEST(DeviceTier, HostShareIsAFixedPlanOfExpertsNeverCopied) {
  device::CpuDevice dev(nullptr);
  HostExperts host;
  store::DeviceTier tier(dev, host, 1 << 20, kLayers, kExperts, 0.5);
  store::DeviceTier again(dev, host, 0, kLayers, kExperts, 0.5);
  for (int l = 0; l < kLayers; ++l) {
    int n = 0;
    for (int e = 0; e < kExperts; ++e) {
      n += tier.on_host(l, e);
      EXPECT_EQ(tier.on_host(l, e), again.on_host(l, e)) << "the plan depends on the budget";
    }
    EXPECT_EQ(n, kExperts / 2) << "layer " << l;
  }
  std::vector<int32_t> all(kExperts);
  for (int e = 0; e < kExperts; ++e) all[size_t(e)] = e;
  for (int round = 0; round < 2; ++round) {
    auto v = lease(tier, 1, all);
    for (int e = 0; e < kExperts; ++e) {
      EXPECT_EQ(v[size_t(e)].compute_on_host, tier.on_host(1, e));
      EXPECT_EQ(v[size_t(e)].gate.place, tier.on_host(1, e) ? device::Place::Host : device::Place::Device);
    }
  }
  const store::TierCounters& c = tier.counters();
  EXPECT_EQ(c.on_host, uint64_t(kExperts));  // 3 a round
  EXPECT_EQ(c.copies, uint64_t(kExperts / 2));
  EXPECT_EQ(c.hits, uint64_t(kExperts / 2));
  ASSERT_EQ(host.asked.size(), 2u);  // the second round asks the RAM store for the host's share only
  EXPECT_EQ(host.asked[1].size(), size_t(kExperts / 2));
  EXPECT_THROW(store::DeviceTier(dev, host, 0, kLayers, kExperts, 1.5), std::exception);
}

// The plan holds in passes of a few rows only: a prefill slice copies every expert it misses,
// those of the plan included, and a decode step after it goes back to the plan.
TEST(DeviceTier, HostShareOnlyInPassesOfAFewRows) {
  device::CpuDevice dev(nullptr);
  HostExperts host;
  store::DeviceTier tier(dev, host, 1 << 20, kLayers, kExperts, 0.5);
  std::vector<int32_t> all(kExperts);
  for (int e = 0; e < kExperts; ++e) all[size_t(e)] = e;
  tier.pass_rows(store::DeviceTier::kHostPassRows + 1);
  for (const auto& v : lease(tier, 0, all)) {
    EXPECT_FALSE(v.compute_on_host);
    EXPECT_EQ(v.gate.place, device::Place::Device);
  }
  EXPECT_EQ(tier.counters().on_host, 0u);
  EXPECT_EQ(tier.counters().copies, uint64_t(kExperts));
  tier.pass_rows(1);
  auto v = lease(tier, 0, all);  // the plan's experts from RAM although slots hold them, the rest hits
  for (int e = 0; e < kExperts; ++e) EXPECT_EQ(v[size_t(e)].compute_on_host, tier.on_host(0, e)) << e;
  EXPECT_EQ(tier.counters().on_host, uint64_t(kExperts / 2));
  EXPECT_EQ(tier.counters().copies, uint64_t(kExperts));
}

TEST(HybridPlan, ShareBalancesTheCoresAgainstTheLink) {
  store::HybridRates r{.link = 60e9, .cores = 90e9, .link_shared = 50e9, .cores_shared = 50e9};
  // s = (1 - f)·C / (P + C) with the rates measured together.
  EXPECT_DOUBLE_EQ(store::hybrid_share(r, 0), 0.5);
  EXPECT_DOUBLE_EQ(store::hybrid_share(r, 0.25), 0.38);  // 0.375, to 0.01
  EXPECT_DOUBLE_EQ(store::hybrid_share(r, 1), 0);
  r.cores_shared = 150e9;
  EXPECT_DOUBLE_EQ(store::hybrid_share(r, 0.2), 0.6);
  r.link_shared = 0;  // nothing crosses the link: every miss on the cores
  EXPECT_DOUBLE_EQ(store::hybrid_share(r, 0.2), 0.8);
  EXPECT_DOUBLE_EQ(store::hybrid_share(store::HybridRates{}, 0.2), 0);  // nothing measured
}

TEST(HybridPlan, CalibrationFileKeepsEachKeyAndRefusesOtherFiles) {
  testing::TempDir tmp("hybrid-cal");
  const std::string path = tmp / "sub/rates.json";
  store::HybridRates r;
  EXPECT_FALSE(store::read_hybrid_calibration(path, "a", &r));
  store::write_hybrid_calibration(path, "a", {1, 2, 3, 4});
  store::write_hybrid_calibration(path, "b", {5, 6, 7, 8});
  store::write_hybrid_calibration(path, "a", {9, 10, 11, 12});
  ASSERT_TRUE(store::read_hybrid_calibration(path, "a", &r));
  EXPECT_EQ(r.link, 9);
  EXPECT_EQ(r.cores_shared, 12);
  ASSERT_TRUE(store::read_hybrid_calibration(path, "b", &r));
  EXPECT_EQ(r.cores, 6);
  EXPECT_FALSE(store::read_hybrid_calibration(path, "c", &r));
  for (const char* bad : {"not json", "{\"format\": \"other\"}",
                          "{\"format\": \"sluice-hybrid-rates\", \"rates\": {\"a\": {\"link\": -1}}}"}) {
    { std::ofstream(path) << bad; }
    try {
      store::read_hybrid_calibration(path, "a", &r);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

// On the CPU device's emulated tier memory (copies are memcpy) every rate comes out positive, and
// the cores' key names the expert's shapes and the thread count.
TEST(HybridPlan, MeasuresBothRatesAloneAndTogether) {
  device::CpuDevice dev(nullptr);
  std::vector<float> w(3 * 8 * 16, 0.25f);  // gate, up [8, 16], down [16, 8]
  device::ExpertView v;
  v.gate = v.up = device::Weight{.type = device::WeightType::F32, .rows = 8, .cols = 16};
  v.down = device::Weight{.type = device::WeightType::F32, .rows = 16, .cols = 8};
  v.gate.data = w.data();
  v.up.data = w.data() + 128;
  v.down.data = w.data() + 256;
  const store::HybridRates r = store::measure_hybrid_rates(dev, v, 2, 0.02);
  EXPECT_GT(r.link, 0);
  EXPECT_GT(r.cores, 0);
  EXPECT_GT(r.link_shared, 0);
  EXPECT_GT(r.cores_shared, 0);
  EXPECT_EQ(store::hybrid_calibration_key("gpu", v, 3), "F32 8x16 F32 8x16 F32 16x8, 3 threads on gpu");
}

TEST(DeviceTier, RefusesExpertsOutsideTheBank) {
  device::CpuDevice dev(nullptr);
  HostExperts host;
  store::DeviceTier tier(dev, host, 1 << 20, kLayers, kExperts);
  EXPECT_THROW(tier.begin(kLayers, std::vector<int32_t>{0}), std::exception);
  EXPECT_THROW(tier.begin(0, std::vector<int32_t>{kExperts}), std::exception);
}

}  // namespace
}  // namespace sluice
