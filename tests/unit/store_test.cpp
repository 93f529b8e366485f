// The streaming expert store against the all-in-RAM path: bit-identical logits and tokens for
// 1-3 homes, records whole or striped, caches so small they evict every layer, prefetch on and off,
// both read engines; read-once passes; throttled, missing and corrupt homes; foreign manifests and
// homes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <span>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/arena.h"
#include "core/error.h"
#include "error_of.h"
#include "model/registry.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "store/device_tier.h"
#include "store/drive_spare.h"
#include "store/prepare.h"
#include "store/reader.h"
#include "store/streaming_experts.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;

model::TinySpec store_spec() {
  model::TinySpec s = testing::tiny_k3_spec();
  s.experts = 24;
  s.top_k = 4;
  s.moe_inter = 96;
  s.latent = 64;
  s.seed = 21;
  return s;
}

std::vector<int32_t> prompt_ids(int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(int32_t((i * 53 + 17) % 480));
  return out;
}

struct Outcome {
  std::vector<float> logits;  // all positions of the prompt
  std::vector<int32_t> tokens;
};

Outcome run_engine(runtime::Engine& e, const std::vector<int32_t>& prompt, int new_tokens) {
  Outcome r;
  auto& m = e.model();
  const int64_t V = m.info().vocab_size;
  auto st = m.new_state();
  r.logits.resize(prompt.size() * size_t(V));
  m.forward(*st, prompt, model::PassOptions{.all_logits = true}, r.logits.data());
  auto st2 = m.new_state();
  r.tokens = runtime::generate_greedy(m, *st2, prompt, {.max_new = new_tokens, .stop_at_eos = false}).generated;
  return r;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { model::write_tiny_checkpoint(store_spec(), model_dir()); }
  std::string model_dir() const { return dir_ / "model"; }
  std::string home(int i) const { return dir_ / ("home" + std::to_string(i)); }
  store::Manifest prepare(int homes, int full_copy = -1, double replicate = 0) {
    fs::remove(store::manifest_path(model_dir()));
    store::PrepareOptions opt;
    for (int i = 0; i < homes; ++i) opt.homes.push_back(store::parse_home_spec(home(i)));
    opt.full_copy_home = full_copy;
    opt.replicate_hot = replicate;
    opt.measure = false;
    return store::prepare_experts(model_dir(), model::expert_bank_of(model_dir()), opt);
  }
  // Every record striped across `homes` homes in proportion to `speeds` (equal without them).
  store::Manifest prepare_striped(int homes, std::vector<double> speeds = {}) {
    fs::remove(store::manifest_path(model_dir()));
    store::PrepareOptions opt;
    for (int i = 0; i < homes; ++i) opt.homes.push_back(store::parse_home_spec(home(i)));
    opt.speeds = std::move(speeds);
    opt.stripe = store::PrepareOptions::Stripe::On;
    opt.measure = false;
    return store::prepare_experts(model_dir(), model::expert_bank_of(model_dir()), opt);
  }
  std::unique_ptr<runtime::Engine> engine(const std::string& experts, double cache_gb, bool prefetch,
                                          const std::string& reader = "auto") {
    runtime::EngineOptions o;
    o.model_dir = model_dir();
    o.experts = experts;
    o.cache_gb = cache_gb;
    o.stream.prefetch = prefetch;
    o.stream.prefetch_min_precision = 0;  // with prefetch on, read every guess (the random routers' never earn the default)
    o.stream.reader.engine = reader;
    return runtime::Engine::load(o);
  }
  void write_uniform_heat() {
    auto c = model::load_kimi_config(model_dir());
    store::Heat h(c.num_layers, c.num_experts);
    for (int l = 0; l < c.num_layers; ++l) {
      std::vector<int32_t> all;
      for (int e = 0; e < c.num_experts; ++e) all.push_back(e);
      h.record(l, all.data(), all.size());
    }
    h.save(store::heat_path(model_dir()));
  }
  // The all-in-RAM run: what every streamed run must equal bit for bit.
  Outcome resident_run(const std::vector<int32_t>& prompt, int new_tokens) {
    auto e = engine("resident", 1, false);
    return run_engine(*e, prompt, new_tokens);
  }
  // Overwrites a byte every `every` bytes from `first` on, in every record file of home i.
  void damage_home(int i, uint64_t first, uint64_t every) {
    for (const auto& entry : fs::recursive_directory_iterator(home(i))) {
      if (entry.path().extension() != ".bin") continue;
      std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
      for (uint64_t off = first; off < fs::file_size(entry.path()); off += every) {
        f.seekp(long(off));
        f.put('\x5a');
      }
    }
  }
  uint64_t slot_bytes() {
    return model::expert_bank_of(model_dir()).layout.slot_bytes;
  }
  testing::TempDir dir_{"store"};
};

TEST_F(StoreTest, StreamedRunsAreBitIdenticalToResident) {
  auto prompt = prompt_ids(10);
  const Outcome ref = resident_run(prompt, 10);
  const double tiny = double(slot_bytes()) * 9 / 1e9;  // 9 slots: far below one layer's union
  for (int homes : {1, 2, 3}) {
    prepare(homes);
    for (bool prefetch : {false, true}) {
      for (const char* reader : {"io_uring", "pread"}) {
        for (double cache : {tiny, 0.01}) {
          SCOPED_TRACE(::testing::Message() << homes << " homes, prefetch " << prefetch << ", reader " << reader
                                            << ", cache " << cache << " GB");
          auto e = engine("stream", cache, prefetch, reader);
          ASSERT_TRUE(e->streaming());
          Outcome got = run_engine(*e, prompt, 10);
          EXPECT_EQ(got.logits, ref.logits);
          EXPECT_EQ(got.tokens, ref.tokens);
          if (cache == tiny) {
            EXPECT_GT(e->store()->counters().misses, e->store()->counters().hits / 4);
          }
        }
      }
    }
  }
}

// The device tier in front of the RAM store (on the CPU device's emulated tier memory): experts
// copied into tier slots, hits, evictions and misses passed through change no bit. Budgets of 3
// slots (below one layer's union: most misses pass through), 20 (evicts every layer) and the
// whole bank (every expert copied once).
TEST_F(StoreTest, ExpertsThroughADeviceTierAreBitIdenticalToResident) {
  auto prompt = prompt_ids(10);
  const Outcome ref = resident_run(prompt, 10);
  prepare(2);
  const store::ExpertBank bank = model::expert_bank_of(model_dir());
  const uint64_t slot = slot_bytes() + 9 * 256;  // a tier slot: the pieces, each 256-aligned
  for (uint64_t slots : {uint64_t(3), uint64_t(20), uint64_t(1000), uint64_t(0)}) {
    // 0: a third of the experts computed "on the host" (here the same CPU device), the rest in
    // 1000 slots: the model's host path (z back, members gathered, rows moved into yexp).
    const double host_share = slots == 0 ? 1.0 / 3 : 0;
    SCOPED_TRACE(::testing::Message() << slots << " slots, host share " << host_share);
    if (slots == 0) slots = 1000;
    auto e = engine("stream", 0.01, true);
    store::DeviceTier tier(device::cpu_device(), *e->store(), slots * slot, int(bank.num_layers),
                           int(bank.num_experts), host_share, /*ahead_precision=*/0);
    e->model().set_expert_provider(&tier);
    Outcome got = run_engine(*e, prompt, 10);
    EXPECT_EQ(got.logits, ref.logits);
    EXPECT_EQ(got.tokens, ref.tokens);
    const store::TierCounters& c = tier.counters();
    ASSERT_GT(c.slot_bytes, 0u);
    EXPECT_LE(c.slot_bytes, slot);
    EXPECT_EQ(c.slots, std::min<uint64_t>(slots * slot / c.slot_bytes, uint64_t(bank.num_layers * bank.num_experts)));
    // Every request is a hit, a copy on demand, a pass-through or the host's; copies ahead of a
    // guess are the other copies, and each either made a hit, was evicted unused, or is still held.
    EXPECT_EQ(c.requests, c.hits + (c.copies - c.ahead) + c.passthrough + c.on_host);
    EXPECT_LE(c.ahead_used + c.ahead_wasted, c.ahead);
    EXPECT_EQ(c.on_host > 0, host_share > 0);
    if (slots == 3) {  // below a layer's union: the copies of one layer evict the last one's
      EXPECT_GT(c.passthrough, 0u);
    } else {
      EXPECT_GT(c.hits, 0u);
    }
    if (slots == 20) {
      EXPECT_GT(c.evictions, 0u);
      EXPECT_GT(c.ahead_used, 0u);  // the guesses in RAM were copied ahead, and some were right
    }
    if (slots == 1000) {
      EXPECT_EQ(c.evictions, 0u);
      EXPECT_EQ(c.passthrough, 0u);
    }
    e->model().set_expert_provider(e->store());
  }
}

// The reader's queue: a prefetch read no drive has started can be dropped (its ticket is then
// unknown), one in flight or done cannot; a promoted prefetch overtakes the other guesses; and
// prefetch reads never take more than their share of a home's queue, so a demand read submitted
// after two guesses starts at once. One home, reads that each sleep 0.3 s (pread engine).
TEST_F(StoreTest, ReaderCancelsQueuedPrefetchesPromotesAndKeepsRoomForDemand) {
  const store::Manifest m = prepare(1);
  const size_t slot = m.layout.slot_bytes;
  auto buf = allocate_touched(6 * slot, store::ExpertLayout::kAlign);
  auto dst = [&](int i) { return buf.get() + size_t(i) * slot; };
  {
    store::ReaderOptions ro{.engine = "pread", .queue_depth = 1};
    store::ExpertReader r(m, ro);
    r.set_home_delay(0, 0.3);
    const uint64_t busy = r.submit(1, 0, dst(0));  // takes the home's only place
    const uint64_t p1 = r.submit(1, 1, dst(1), false), p2 = r.submit(1, 2, dst(2), false),
                   p3 = r.submit(1, 3, dst(3), false);
    EXPECT_TRUE(r.cancel(p1));
    EXPECT_FALSE(r.cancel(p1));
    EXPECT_NE(testing::error_of([&] { r.wait(p1); }).find("unknown"), std::string::npos);
    r.promote(p3);
    const uint64_t order[] = {p2, p3};
    EXPECT_EQ(r.wait_any(order), 1u) << "the promoted read should land first";
    r.wait(busy);
    EXPECT_FALSE(r.cancel(busy));  // done and collected
    r.wait(p2);
  }
  {
    store::ReaderOptions ro{.engine = "pread", .queue_depth = 2};  // prefetch depth: 1
    store::ExpertReader r(m, ro);
    r.set_home_delay(0, 0.3);
    const uint64_t p1 = r.submit(1, 0, dst(0), false), p2 = r.submit(1, 1, dst(1), false);
    // Let the reader take what it may of the two guesses before the demand read arrives (else the
    // demand read simply queues ahead of them).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const uint64_t d = r.submit(1, 2, dst(2));
    const uint64_t order[] = {p2, d};
    EXPECT_EQ(r.wait_any(order), 1u) << "the demand read waited behind a second prefetch";
    r.wait(p1);
    r.wait(p2);
  }
  store::ReaderOptions bad{.queue_depth = 2, .prefetch_depth = 3};
  EXPECT_NE(testing::error_of([&] { store::ExpertReader r(m, bad); }).find("prefetch depth 3"), std::string::npos);
}

// Prefetch through a slow home: guesses still queued when their layer's route arrives are
// dropped (counted, their bytes not), and the run stays bit-identical to the all-in-RAM one.
TEST_F(StoreTest, CancelledPrefetchesChangeNothingButTheBytes) {
  auto prompt = prompt_ids(6);
  const Outcome ref = resident_run(prompt, 6);
  prepare(1);
  runtime::EngineOptions o;
  o.model_dir = model_dir();
  o.experts = "stream";
  o.cache_gb = double(slot_bytes()) * 24 / 1e9;
  o.stream.reader.engine = "pread";
  o.stream.prefetch_min_precision = 0;  // read every guess (a random router's guesses never earn the default)
  auto e = runtime::Engine::load(o);
  e->store()->set_home_delay(0, 0.002);
  Outcome got = run_engine(*e, prompt, 6);
  EXPECT_EQ(got.logits, ref.logits);
  EXPECT_EQ(got.tokens, ref.tokens);
  const auto& c = e->store()->counters();
  EXPECT_GT(c.prefetch_cancelled, 0u);
  EXPECT_LE(c.prefetch_used + c.prefetch_cancelled, c.prefetch_issued);
  uint64_t reads = 0;
  for (const auto& h : e->store()->home_stats()) reads += h.reads;
  EXPECT_EQ(c.bytes_read, reads * slot_bytes()) << "bytes counted for reads that never happened";
}

// The precision gate: a rank of a layer is read ahead only once its guesses were right often
// enough lately. Step i predicts layer 1 as [x_i, b] (a new x each step) and asks for [x_i, c]:
// rank 0 is always right, so its EWMA (from 0, weight 0.2) passes 0.85 after 9 steps and x_i is
// read ahead from step 9 on; rank 1 is never right and never read.
TEST_F(StoreTest, PrefetchReadsOnlyRanksThatEarnedIt) {
  store::StreamOptions so;
  so.cache_bytes = slot_bytes() * 20;
  so.prefetch_min_precision = 0.85;
  store::StreamingExperts s(prepare(1), so);
  const int32_t b = 2, c = 1;
  for (int step = 0; step < 16; ++step) {
    EXPECT_EQ(s.counters().prefetch_issued, uint64_t(std::max(0, step - 9))) << "step " << step;
    const int32_t x = 4 + step;
    const int32_t guess[] = {x, b};
    const int32_t asked[] = {c, x};  // ascending, as the model asks
    s.prefetch(1, guess, 1);
    s.begin(1, asked);
    device::ExpertView v;
    while (s.next_ready(&v) >= 0) {
    }
    s.release(1);
  }
  EXPECT_EQ(s.counters().prefetch_issued, 7u);
  EXPECT_EQ(s.counters().prefetch_used, 7u);
  EXPECT_EQ(s.counters().prefetch_suppressed, 16u + 9u);  // rank 1 every step, rank 0 until it earned it
  store::StreamOptions all = so;
  all.prefetch_min_precision = 0;
  store::StreamingExperts s2(prepare(1), all);
  const int32_t guess[] = {5, b};
  s2.prefetch(1, guess, 1);
  EXPECT_EQ(s2.counters().prefetch_issued, 2u);
  EXPECT_EQ(s2.counters().prefetch_suppressed, 0u);
}

// Guesses two layers ahead earn their own precision, and are read only while the drives idle.
// Step i hands layer 1 a guess one layer ahead that is never right ([b, 3]) and one two layers
// ahead whose rank 0 always is ([x_i, b]), then asks for [c, x_i]: only the two-layer guesses are
// read, from step 9 on (rank 0's EWMA, from 0 with weight 0.2, passes 0.85 after 9 steps).
TEST_F(StoreTest, GuessesTwoLayersAheadEarnTheirOwnPrecisionAndWaitForIdleDrives) {
  store::StreamOptions so;
  so.cache_bytes = slot_bytes() * 20;
  so.prefetch_min_precision = 0.85;
  so.prefetch_layers = 2;
  so.reader.engine = "pread";
  store::StreamingExperts s(prepare(1), so);
  EXPECT_EQ(s.lookahead(), 2);  // no read queued or in flight
  const int32_t b = 2, c = 1;
  for (int step = 0; step < 16; ++step) {
    const int32_t x = 4 + step;
    const int32_t near[] = {b, 3}, far[] = {x, b};
    const int32_t asked[] = {c, x};  // ascending, as the model asks
    s.prefetch(1, far, 2);
    s.prefetch(1, near, 1);
    s.begin(1, asked);
    device::ExpertView v;
    while (s.next_ready(&v) >= 0) {
    }
    s.release(1);
  }
  const auto& k = s.counters();
  EXPECT_EQ(k.prefetch_further, 7u);
  EXPECT_EQ(k.prefetch_further_used, 7u);
  EXPECT_EQ(k.prefetch_issued, 7u);  // the one-layer guesses never earned a read
  EXPECT_EQ(k.prefetch_used, 7u);
  EXPECT_EQ(k.prefetch_suppressed, 2u * 16u + 16u + 9u);
  EXPECT_EQ(k.predicted_total, 2u * 16u);  // next-layer recall counts the one-layer guesses only
  EXPECT_EQ(k.predicted_correct, 0u);

  // While a read is in flight the model is asked for the next layer only, and a guess two layers
  // ahead handed over anyway is not read; once the drives idle again, two layers.
  store::StreamOptions all = so;
  all.prefetch_min_precision = 0;
  store::StreamingExperts s2(prepare(1), all);
  s2.set_home_delay(0, 0.3);
  const int32_t one[] = {5}, other[] = {6};
  s2.prefetch(1, one, 1);
  EXPECT_EQ(s2.lookahead(), 1);
  s2.prefetch(2, other, 2);
  EXPECT_EQ(s2.counters().prefetch_issued, 1u);
  EXPECT_EQ(s2.counters().prefetch_further, 0u);
  for (int i = 0; i < 300 && s2.lookahead() != 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(s2.lookahead(), 2);
  s2.prefetch(2, other, 2);
  EXPECT_EQ(s2.counters().prefetch_further, 1u);

  // One layer ahead only, or none: farther guesses are never asked for, nor read if handed over.
  store::StreamOptions one_layer = all;
  one_layer.prefetch_layers = 1;
  store::StreamingExperts s3(prepare(1), one_layer);
  EXPECT_EQ(s3.lookahead(), 1);
  s3.prefetch(2, other, 2);
  EXPECT_EQ(s3.counters().prefetch_issued, 0u);
  store::StreamOptions off = all;
  off.prefetch = false;
  EXPECT_EQ(store::StreamingExperts(prepare(1), off).lookahead(), 0);
  store::StreamOptions bad = all;
  bad.prefetch_layers = store::kMaxPrefetchLayers + 1;
  EXPECT_NE(testing::error_of([&] { store::StreamingExperts x(prepare(1), bad); })
                .find("--prefetch-layers 5 is outside 1..4"),
            std::string::npos);
}

// --prefetch-idle: next-layer guesses that have not earned the precision gate are read when they
// arrive while no read is queued or in flight, as many as the drive time a layer leaves unused
// can read; none before a period between requests is measured, none while a read is in flight,
// and none when off.
TEST_F(StoreTest, IdleDrivesReadNextLayerGuessesThatHaveNotEarnedTheGate) {
  store::StreamOptions so;
  so.cache_bytes = slot_bytes() * 20;
  so.prefetch_min_precision = 0.95;  // no rank has earned it: its EWMA starts at 0
  so.prefetch_when_idle = true;
  so.reader.engine = "pread";
  const int32_t first[] = {0}, guesses[] = {5, 6, 7}, other[] = {9};
  auto request = [](store::StreamingExperts& s, std::span<const int32_t> experts) {
    s.begin(1, experts);
    device::ExpertView v;
    while (s.next_ready(&v) >= 0) {
    }
    s.release(1);
  };
  {
    store::StreamingExperts s(prepare(1), so);
    s.prefetch(2, guesses, 1);  // idle drives, but no period measured: no allowance yet
    EXPECT_EQ(s.counters().prefetch_issued, 0u);
    EXPECT_EQ(s.counters().prefetch_suppressed, 3u);
    // Two requests 20 ms apart with one small read between them: the drives idled nearly all of
    // the period, room for far more than three records.
    request(s, first);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    request(s, first);
    EXPECT_GE(s.drives_idle_seconds(), 0.02);  // the sleep, at least
    EXPECT_GT(s.home_stats()[0].busy_seconds, 0.0);  // the first request's read
    s.set_home_delay(0, 0.3);
    s.prefetch(2, guesses, 1);  // idle: read
    EXPECT_EQ(s.counters().prefetch_issued, 3u);
    EXPECT_EQ(s.counters().prefetch_idle, 3u);
    EXPECT_EQ(s.counters().prefetch_suppressed, 3u);
    s.prefetch(1, other, 1);  // those reads are in flight: gated
    EXPECT_EQ(s.counters().prefetch_issued, 3u);
    EXPECT_EQ(s.counters().prefetch_suppressed, 4u);
  }
  // Off (the default), idle drives change nothing.
  store::StreamOptions off = so;
  off.prefetch_when_idle = false;
  store::StreamingExperts t(prepare(1), off);
  request(t, first);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  request(t, first);
  t.prefetch(2, guesses, 1);
  EXPECT_EQ(t.counters().prefetch_issued, 0u);
  EXPECT_EQ(t.counters().prefetch_suppressed, 3u);
}

// The allowance: what the drives could read in the time they idle, averaged over periods; nothing
// while they are the bottleneck, and a long pause moves it as a period twice the average would.
TEST(DriveSpare, IsWhatTheDrivesCouldReadWhileTheyIdle) {
  store::DriveSpare d;
  EXPECT_EQ(d.bytes(), 0.0);
  d.add(0.0, 0.0, 1e9);  // meaningless periods are ignored
  d.add(0.01, 0.01, 0.0);
  EXPECT_EQ(d.bytes(), 0.0);
  d.add(0.01, 0.01, 1e9);  // 10 ms, all idle, at 1 GB/s
  EXPECT_DOUBLE_EQ(d.bytes(), 1e7);
  for (int i = 0; i < 60; ++i) d.add(0.01, 0.0, 1e9);  // never idle: the bottleneck
  EXPECT_LT(d.bytes(), 1e3);
  for (int i = 0; i < 60; ++i) d.add(0.01, 0.0075, 1e9);  // a quarter busy
  EXPECT_NEAR(d.bytes(), 7.5e6, 1e3);
  d.add(10.0, 10.0, 1e9);  // a 10 s pause counts as 20 ms, all idle
  EXPECT_NEAR(d.idle_share(), 0.8 * 0.75 + 0.2, 1e-3);
  EXPECT_NEAR(d.bytes(), 0.8 * 1e7 * 1.2, 1e4);
}

// Kimi's layer loop hands over guesses two layers ahead when the provider asks, without moving a
// logit; streamed with them (every guess read), runs stay bit-identical to the all-in-RAM one.
TEST_F(StoreTest, GuessesTwoLayersAheadChangeNothingButTheReads) {
  auto prompt = prompt_ids(8);
  const Outcome ref = resident_run(prompt, 8);
  {
    auto e = engine("resident", 1, false);
    auto& m = e->model();
    store::ExpertProvider* resident = m.expert_provider();
    testing::AskTwoLayersAhead ask(resident);
    m.set_expert_provider(&ask);
    std::vector<float> logits(size_t(m.info().vocab_size));
    auto st = m.new_state();
    m.forward(*st, prompt, model::PassOptions{}, logits.data());
    m.set_expert_provider(resident);
    EXPECT_EQ(ask.handed, testing::guesses_two_layers_ahead(m.expert_bank()->moe_layers));
  }
  prepare(2);
  const double tiny = double(slot_bytes()) * 9 / 1e9;
  for (double cache : {tiny, 0.01}) {
    SCOPED_TRACE(::testing::Message() << "cache " << cache << " GB");
    runtime::EngineOptions o;
    o.model_dir = model_dir();
    o.experts = "stream";
    o.cache_gb = cache;
    o.stream.prefetch_min_precision = 0;
    o.stream.prefetch_layers = 2;
    auto e = runtime::Engine::load(o);
    Outcome got = run_engine(*e, prompt, 8);
    EXPECT_EQ(got.logits, ref.logits);
    EXPECT_EQ(got.tokens, ref.tokens);
    const auto& k = e->store()->counters();
    EXPECT_LE(k.prefetch_further, k.prefetch_issued);
    EXPECT_LE(k.prefetch_further_used, k.prefetch_further);
  }
}

TEST_F(StoreTest, PrefillReadsEachRoutedExpertOncePerLayerPerPass) {
  prepare(2);
  auto e = engine("stream", 0.01, /*prefetch=*/false);
  auto& m = e->model();
  auto st = m.new_state();
  auto prompt = prompt_ids(40);  // 40 rows x 4 experts over 24 experts: heavy overlap
  std::vector<float> logits(size_t(m.info().vocab_size));
  m.forward(*st, prompt, model::PassOptions{}, logits.data());
  const auto& c = e->store()->counters();
  // Cold cache, one pass: every expert of each layer's union is read exactly once.
  EXPECT_EQ(c.misses, uint64_t(m.counters().expert_requests));
  EXPECT_EQ(c.hits, 0u);
  uint64_t reads = 0;
  for (auto r : c.reads_by_layer) {
    EXPECT_LE(r, uint64_t(m.expert_bank()->num_experts));
    reads += r;
  }
  EXPECT_EQ(reads, c.misses);
  // The union is far smaller than rows x top-k: reads are not per row.
  EXPECT_LT(c.misses, uint64_t(m.counters().routed_slots) / 4);
}

TEST_F(StoreTest, ThrottledHomeReceivesFewerReads) {
  write_uniform_heat();
  prepare(2, -1, 1.0);  // every expert on both homes
  auto e = engine("stream", double(slot_bytes()) * 12 / 1e9, false, "pread");
  e->store()->set_home_delay(0, 0.004);
  run_engine(*e, prompt_ids(6), 8);
  auto hs = e->store()->home_stats();
  EXPECT_LT(hs[0].reads * 2, hs[1].reads) << "slow home " << hs[0].reads << " reads, fast home " << hs[1].reads;
}

TEST_F(StoreTest, MissingHomeIsServedByReplicas) {
  auto prompt = prompt_ids(8);
  const Outcome ref = resident_run(prompt, 8);
  write_uniform_heat();
  prepare(2, -1, 1.0);
  auto e = engine("stream", double(slot_bytes()) * 10 / 1e9, true);
  Outcome first = run_engine(*e, prompt, 4);
  // The drive fails mid-run: its files lose their data under the open descriptors.
  for (const auto& entry : fs::recursive_directory_iterator(home(0)))
    if (entry.path().extension() == ".bin") fs::resize_file(entry.path(), 0);
  Outcome got = run_engine(*e, prompt, 8);
  EXPECT_EQ(got.tokens, ref.tokens);
  EXPECT_EQ(got.logits, ref.logits);
  EXPECT_GT(e->store()->home_stats()[0].errors, 0u);
}

TEST_F(StoreTest, HomeMissingAtStartIsServedByReplicas) {
  write_uniform_heat();
  prepare(2, -1, 1.0);
  auto prompt = prompt_ids(5);
  const Outcome ref = resident_run(prompt, 5);
  fs::rename(home(1), home(1) + ".gone");
  auto e = engine("stream", 0.01, true);
  EXPECT_EQ(run_engine(*e, prompt, 5).tokens, ref.tokens);
  EXPECT_GT(e->store()->home_stats()[1].errors, 0u);
  EXPECT_EQ(e->store()->home_stats()[1].reads, 0u);
}

TEST_F(StoreTest, NoGoodCopyNamesTheExpertAndHomes) {
  prepare(1);
  auto e = engine("stream", double(slot_bytes()) * 10 / 1e9, false);
  fs::rename(home(0), home(0) + ".gone");
  try {
    run_engine(*e, prompt_ids(4), 2);
    FAIL() << "expected an error";
  } catch (const Error& err) {
    std::string msg = err.what();
    EXPECT_NE(msg.find("expert "), std::string::npos) << msg;
    EXPECT_NE(msg.find("of layer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("home0"), std::string::npos) << msg;
  }
}

TEST_F(StoreTest, CorruptRecordIsRejectedByChecksumAndRetried) {
  write_uniform_heat();
  auto m = prepare(2, -1, 1.0);
  damage_home(0, 100, m.layout.slot_bytes);  // every record of home 0
  auto prompt = prompt_ids(6);
  const Outcome ref = resident_run(prompt, 6);
  auto e = engine("stream", 0.01, false);
  Outcome got = run_engine(*e, prompt, 6);
  EXPECT_EQ(got.logits, ref.logits);
  EXPECT_GT(e->store()->home_stats()[0].errors, 0u);
}

TEST_F(StoreTest, ForeignOrCorruptManifestIsRefused) {
  prepare(1);
  std::string path = store::manifest_path(model_dir());
  std::string text;
  {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto expect_refused = [&](const std::string& content, const std::string& want) {
    std::ofstream(path) << content;
    try {
      engine("stream", 0.01, false);
      ADD_FAILURE() << "manifest accepted: " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  std::string foreign = text;
  foreign.replace(foreign.find("\"model_id\"") + 13, 4, "dead");
  expect_refused(foreign, "another model");
  expect_refused("{\"format\": \"sluice-expert-manifest\", \"version\": 99}", "version 99");
  expect_refused(text.substr(0, text.size() / 2), "sluice-manifest.json");
}

TEST_F(StoreTest, HomeOfAnotherModelIsRefused) {
  prepare(1);
  testing::TempDir other("other-model");
  model::TinySpec s = store_spec();
  s.seed = 99;
  s.experts = 20;
  model::write_tiny_checkpoint(s, other.str());
  store::PrepareOptions opt;
  opt.homes.push_back(store::parse_home_spec(home(0)));
  opt.measure = false;
  const store::ExpertBank bank = model::expert_bank_of(other.str());
  try {
    store::prepare_experts(other.str(), bank, opt);
    FAIL() << "a home holding another model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, PrepareResumesWithoutRewritingFinishedFiles) {
  auto m1 = prepare(2);
  std::map<std::string, fs::file_time_type> times;
  for (const auto& e : fs::recursive_directory_iterator(dir_.str()))
    if (e.path().extension() == ".bin") times[e.path()] = fs::last_write_time(e.path());
  ASSERT_FALSE(times.empty());
  // An interrupted run leaves a temporary file and misses a layer file.
  auto victim = times.begin()->first;
  fs::remove(victim);
  std::ofstream(victim + ".tmp") << "partial";
  auto m2 = prepare(2);
  EXPECT_TRUE(fs::exists(victim));
  for (const auto& [path, t] : times) {
    if (path != victim) {
      EXPECT_EQ(fs::last_write_time(path), t) << path;
    }
  }
  for (size_t l = 0; l < m1.holders.size(); ++l)
    for (size_t e = 0; e < m1.holders[l].size(); ++e)
      for (size_t h = 0; h < m1.holders[l][e].size(); ++h) EXPECT_EQ(m1.holders[l][e][h].xxh3, m2.holders[l][e][h].xxh3);
}

TEST_F(StoreTest, PlacementBalancesEachLayerAcrossHomes) {
  auto m = prepare(3);
  for (size_t l = 0; l < m.holders.size(); ++l) {
    if (m.holders[l].empty()) continue;
    std::vector<int> per_home(3, 0);
    for (const auto& hs : m.holders[l]) per_home[size_t(hs[0].home)] += 1;
    EXPECT_LE(*std::max_element(per_home.begin(), per_home.end()) - *std::min_element(per_home.begin(), per_home.end()), 1)
        << "layer " << l;
  }
}

// With `sluice bench drives` rates on every home, each layer's experts go to the homes in
// proportion to them (the drives of one layer's reads then finish together); the rates go into the
// manifest. A home without a measurement means equal shares for all.
// --rebalance: an install re-placed by new drive speeds from its own homes, with the checkpoint's
// shards gone: records land where the new speeds say, every read verifies, the run is
// bit-identical, files only the old manifest used are removed, and a second rebalance with the
// same speeds rewrites nothing. Without a manifest it is refused.
TEST_F(StoreTest, RebalanceReplacesFromTheHomesWithoutTheCheckpoint) {
  auto prompt = prompt_ids(6);
  const Outcome ref = resident_run(prompt, 6);
  store::PrepareOptions bad;
  bad.rebalance = true;
  EXPECT_NE(testing::error_of([&] { store::prepare_experts(model_dir(), model::expert_bank_of(model_dir()), bad); })
                .find("needs a prepared install"),
            std::string::npos);
  const store::Manifest before = prepare(2);  // equal shares
  // The checkpoint's tensors move away: only config.json (the identity) stays.
  const std::string aside = dir_ / "aside";
  fs::create_directories(aside);
  for (const auto& f : fs::directory_iterator(model_dir()))
    if (f.path().extension() == ".safetensors") fs::rename(f.path(), aside + "/" + f.path().filename().string());
  store::PrepareOptions opt;
  opt.rebalance = true;
  opt.measure = false;
  opt.speeds = {3e8, 1e8};  // home 0 three times as fast
  const store::Manifest after = store::prepare_experts(model_dir(), model::expert_bank_of(model_dir()), opt);
  EXPECT_GT(after.bytes_on_home(0), 2 * after.bytes_on_home(1));
  EXPECT_LT(before.bytes_on_home(0), 2 * before.bytes_on_home(1));
  // Every file the manifest names exists; every old file it no longer names is gone.
  std::set<std::string> named;
  for (const auto& layer : after.holders)
    for (const auto& hs : layer)
      for (const store::Holder& h : hs) named.insert(after.homes[size_t(h.home)].path + "/" + h.file);
  for (const std::string& f : named) EXPECT_TRUE(fs::exists(f)) << f;
  for (int h = 0; h < 2; ++h)
    for (const auto& f : fs::recursive_directory_iterator(home(h)))
      if (f.path().extension() == ".bin") {
        EXPECT_TRUE(named.count(f.path().string())) << "left behind: " << f.path();
      }
  for (const auto& f : fs::directory_iterator(aside)) fs::rename(f.path(), model_dir() + "/" + f.path().filename().string());
  {
    auto e = engine("stream", double(slot_bytes()) * 9 / 1e9, true, "pread");
    Outcome got = run_engine(*e, prompt, 6);
    EXPECT_EQ(got.logits, ref.logits);
    EXPECT_EQ(got.tokens, ref.tokens);
  }
  // Again with the same speeds: every file is kept (same names, same modification times).
  std::map<std::string, fs::file_time_type> times;
  for (const std::string& f : named) times[f] = fs::last_write_time(f);
  const store::Manifest again = store::prepare_experts(model_dir(), model::expert_bank_of(model_dir()), opt);
  for (const std::string& f : named) EXPECT_EQ(fs::last_write_time(f), times[f]) << "rewritten: " << f;
  EXPECT_EQ(again.bytes_on_home(0), after.bytes_on_home(0));
}

TEST_F(StoreTest, PlacementFollowsMeasuredDriveSpeeds) {
  const double rates[] = {300e6, 150e6, 50e6};
  for (int i = 0; i < 3; ++i) {
    fs::create_directories(home(i));
    std::ofstream(home(i) + "/sluice-drive.json") << "{\"read_bytes_per_s\": " << rates[i] << "}\n";
  }
  auto m = prepare(3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(m.homes[size_t(i)].read_bytes_per_s, rates[i]);
  for (size_t l = 0; l < m.holders.size(); ++l) {
    if (m.holders[l].empty()) continue;
    std::vector<int> per_home(3, 0);
    for (const auto& hs : m.holders[l]) per_home[size_t(hs[0].home)] += 1;
    const double n = double(m.holders[l].size());
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(per_home[size_t(i)], n * rates[i] / 500e6, 1.0) << "layer " << l << " home " << i;
  }
  fs::remove(home(2) + "/sluice-drive.json");
  EXPECT_TRUE(store::measured_drive_speeds(m.homes).empty());
  auto even = prepare(3);
  for (size_t l = 0; l < even.holders.size(); ++l) {
    if (even.holders[l].empty()) continue;
    std::vector<int> per_home(3, 0);
    for (const auto& hs : even.holders[l]) per_home[size_t(hs[0].home)] += 1;
    EXPECT_LE(*std::max_element(per_home.begin(), per_home.end()) - *std::min_element(per_home.begin(), per_home.end()), 1);
  }
  // Hot replicas go to the fastest home that lacks the expert (its primary elsewhere): here home 1,
  // else home 2; home 0, the slowest, never gets one.
  const double replica_rates[] = {50e6, 300e6, 150e6};
  for (int i = 0; i < 3; ++i)
    std::ofstream(home(i) + "/sluice-drive.json") << "{\"read_bytes_per_s\": " << replica_rates[i] << "}\n";
  write_uniform_heat();
  auto hot = prepare(3, -1, 0.5);
  int replicas = 0;
  for (const auto& layer : hot.holders)
    for (const auto& hs : layer) {
      if (hs.size() < 2) continue;
      ++replicas;
      EXPECT_EQ(hs[1].home, hs[0].home == 1 ? 2 : 1) << "a replica not on the fastest home without it";
    }
  EXPECT_GT(replicas, 0);
  // The re-placed install reads back exactly (files kept only where their records match).
  auto e = engine("stream", 1, false);
  auto r = engine("resident", 1, false);
  EXPECT_EQ(run_engine(*e, {1, 2, 3}, 4).tokens, run_engine(*r, {1, 2, 3}, 4).tokens);
}

// Striped records: every record is cut into one part per home, sized by the homes' rates in whole
// pages, and streamed runs stay bit-identical to the all-in-RAM one with both engines, prefetch on
// and off and a cache that evicts every layer; each home serves its parts.
TEST_F(StoreTest, StripedRecordsStreamBitIdenticalToResident) {
  auto prompt = prompt_ids(10);
  const Outcome ref = resident_run(prompt, 10);
  const uint64_t slot = slot_bytes();
  const uint64_t pages = slot / store::ExpertLayout::kAlign;
  ASSERT_GE(pages, 3u) << "the test model's records must have a page for each of three homes";
  const std::vector<double> rates = {2e8, 1e8, 1e8};
  const store::Manifest m = prepare_striped(3, rates);
  const std::vector<store::Part> want = store::stripe_parts(slot, rates, 3);
  for (const auto& layer : m.holders)
    for (const auto& hs : layer) {
      ASSERT_EQ(hs.size(), 3u);
      EXPECT_EQ(store::parts_of(hs), want);
      EXPECT_EQ(store::copies_of(hs), 1u);
      for (size_t h = 0; h < 3; ++h) EXPECT_EQ(hs[h].home, int(h));
    }
  for (const char* reader : {"io_uring", "pread"})
    for (bool prefetch : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "reader " << reader << ", prefetch " << prefetch);
      auto e = engine("stream", double(slot) * 9 / 1e9, prefetch, reader);
      Outcome got = run_engine(*e, prompt, 10);
      EXPECT_EQ(got.logits, ref.logits);
      EXPECT_EQ(got.tokens, ref.tokens);
      const auto stats = e->store()->home_stats();
      for (size_t h = 0; h < 3; ++h) {
        EXPECT_GT(stats[h].reads, 0u) << "home " << h;
        EXPECT_EQ(stats[h].bytes, stats[h].reads * want[h].length) << "home " << h;
      }
      EXPECT_EQ(stats[0].reads, stats[1].reads) << "every record read is one read of each part";
    }
  // A home whose share rounds to no page holds nothing.
  const store::Manifest two = prepare_striped(3, {3e8, 1e8, 2e8});
  ASSERT_EQ(store::stripe_parts(slot, {3e8, 1e8, 2e8}, 3)[1].length, 0u);
  EXPECT_EQ(two.bytes_on_home(1), 0u);
  EXPECT_EQ(store::parts_of(two.holders[1][0]).size(), 2u);
  auto e = engine("stream", double(slot) * 9 / 1e9, true);
  EXPECT_EQ(run_engine(*e, prompt, 10).tokens, ref.tokens);
}

// A read's time on idle drives, from the bandwidth estimates (the manifest's rates until reads
// update them): a whole record at its home's rate, a striped one its slowest part.
TEST_F(StoreTest, SoloReadTimeIsTheSlowestPartAtItsHomesRate) {
  const store::ReaderOptions ro{.engine = "pread"};
  {
    store::Manifest m = prepare(1);
    m.homes[0].read_bytes_per_s = 1e8;
    store::ExpertReader r(m, ro);
    EXPECT_NEAR(r.solo_seconds(1, 0), double(m.holders[1][0][0].length) / 1e8, 1e-12);
  }
  const std::vector<double> rates = {2e8, 1e8, 1e8};
  const store::Manifest m = prepare_striped(3, rates);
  store::ExpertReader r(m, ro);
  double slowest = 0;
  for (const store::Holder& h : m.holders[1][0]) slowest = std::max(slowest, double(h.length) / rates[size_t(h.home)]);
  EXPECT_GT(slowest, 0.0);
  EXPECT_NEAR(r.solo_seconds(1, 0), slowest, 1e-12);
}

// The parts: whole 4 KiB pages in proportion to the rates (largest remainders get the spare
// pages), tiling the slot in home order; equal shares without rates.
TEST_F(StoreTest, StripePartsFollowTheRatesInWholePages) {
  const uint64_t P = store::ExpertLayout::kAlign;
  EXPECT_EQ(store::stripe_parts(10 * P, {3e8, 1e8, 1e8}, 3),
            (std::vector<store::Part>{{0, 6 * P}, {6 * P, 2 * P}, {8 * P, 2 * P}}));
  EXPECT_EQ(store::stripe_parts(10 * P, {}, 4),
            (std::vector<store::Part>{{0, 3 * P}, {3 * P, 3 * P}, {6 * P, 2 * P}, {8 * P, 2 * P}}));
  EXPECT_EQ(store::stripe_parts(10 * P, {1e8, 0}, 2), (std::vector<store::Part>{{0, 5 * P}, {5 * P, 5 * P}}))
      << "an unknown rate means equal shares";
  const auto tiny = store::stripe_parts(P, {1e8, 1e8, 1e8}, 3);
  EXPECT_EQ(tiny[0].length + tiny[1].length + tiny[2].length, P);
  uint64_t at = 0;
  for (const auto& p : store::stripe_parts(777 * P, {340e6, 178e6, 178e6, 143e6}, 4)) {
    EXPECT_EQ(p.at, at);
    at += p.length;
  }
  EXPECT_EQ(at, 777 * P);
}

// When prepare stripes: --stripe on needs two homes and no whole-record replicas, and says so;
// auto stripes only records whose every part is at least kMinStripePart.
TEST_F(StoreTest, StripingIsRefusedWhereItCannotApplyAndAutoNeedsLargeRecords) {
  const store::ExpertBank bank = model::expert_bank_of(model_dir());
  store::PrepareOptions opt;
  opt.stripe = store::PrepareOptions::Stripe::On;
  opt.homes = {store::parse_home_spec(home(0))};
  EXPECT_NE(testing::error_of([&] { store::use_stripes(bank, slot_bytes(), opt); }).find("two or more homes"),
            std::string::npos);
  opt.homes.push_back(store::parse_home_spec(home(1)));
  EXPECT_TRUE(store::use_stripes(bank, slot_bytes(), opt));
  opt.replicate_hot = 0.5;
  EXPECT_NE(testing::error_of([&] { store::use_stripes(bank, slot_bytes(), opt); }).find("--replicate-hot"),
            std::string::npos);
  opt.replicate_hot = 0;
  opt.full_copy_home = 0;
  EXPECT_NE(testing::error_of([&] { store::use_stripes(bank, slot_bytes(), opt); }).find("--full-copy"),
            std::string::npos);
  opt.full_copy_home = -1;
  opt.homes[1].capacity_bytes = 4096;
  EXPECT_NE(testing::error_of([&] { store::use_stripes(bank, slot_bytes(), opt); }).find("too small"),
            std::string::npos);
  opt.homes[1].capacity_bytes = 0;
  opt.stripe = store::PrepareOptions::Stripe::Auto;
  EXPECT_FALSE(store::use_stripes(bank, slot_bytes(), opt)) << "parts of a few pages are below the minimum";
  EXPECT_TRUE(store::use_stripes(bank, 2 * store::kMinStripePart, opt));
  EXPECT_FALSE(store::use_stripes(bank, 2 * store::kMinStripePart - store::ExpertLayout::kAlign, opt));
  opt.replicate_hot = 0.5;
  EXPECT_FALSE(store::use_stripes(bank, 2 * store::kMinStripePart, opt)) << "auto keeps whole records for replicas";
  opt.stripe = store::PrepareOptions::Stripe::Off;
  opt.replicate_hot = 0;
  EXPECT_FALSE(store::use_stripes(bank, 2 * store::kMinStripePart, opt));
}

// A part is retried on another copy of that part when its holder returns bad bytes; a part with
// no good copy fails the record, naming the expert, the bytes and the home.
TEST_F(StoreTest, StripedPartIsRetriedOnItsOtherCopyOrNamedWhenNoneIsGood) {
  store::Manifest m = prepare_striped(2);
  // A second copy of home 1's parts, in another file on home 0.
  for (auto& layer : m.holders)
    for (auto& hs : layer) {
      if (hs.empty()) continue;
      store::Holder copy = hs[1];
      copy.home = 0;
      copy.file = "copy/" + fs::path(hs[1].file).filename().string();
      const std::string dst = home(0) + "/" + copy.file;
      fs::create_directories(fs::path(dst).parent_path());
      if (!fs::exists(dst)) fs::copy_file(home(1) + "/" + hs[1].file, dst);
      hs.push_back(copy);
    }
  store::write_manifest(m, store::manifest_path(model_dir()));
  damage_home(1, 10, 4096);  // every part on home 1
  auto prompt = prompt_ids(6);
  const Outcome ref = resident_run(prompt, 6);
  {
    auto e = engine("stream", double(slot_bytes()) * 9 / 1e9, false);
    Outcome got = run_engine(*e, prompt, 6);
    EXPECT_EQ(got.logits, ref.logits);
    EXPECT_EQ(got.tokens, ref.tokens);
    EXPECT_GT(e->store()->home_stats()[1].errors, 0u);
  }
  // Without the copy, the read fails and says which part of which expert, and where.
  fs::remove_all(home(0) + "/copy");
  auto e = engine("stream", double(slot_bytes()) * 9 / 1e9, false);
  const std::string msg = testing::error_of([&] { run_engine(*e, prompt, 2); });
  EXPECT_NE(msg.find("of layer"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(bytes " + std::to_string(m.holders[1][0][1].at) + ".."), std::string::npos) << msg;
  EXPECT_NE(msg.find("home1"), std::string::npos) << msg;
}

// A striped manifest is read only when each record's parts tile its slot and the copies of a part
// agree on its length.
TEST_F(StoreTest, StripedManifestMustTileEveryRecord) {
  prepare_striped(2);
  const std::string path = store::manifest_path(model_dir());
  const nlohmann::json good = nlohmann::json::parse(std::ifstream(path));
  auto refused = [&](auto&& edit, const std::string& want) {
    nlohmann::json j = good;
    edit(j["layers"][1][0]);
    std::ofstream(path) << j.dump(1);
    const std::string msg = testing::error_of([&] { engine("stream", 0.01, false); });
    EXPECT_NE(msg.find(want), std::string::npos) << "wanted '" << want << "' in: " << msg;
  };
  ASSERT_EQ(good["layers"][1][0][0]["length"].get<uint64_t>(), 8192u) << "the test expects parts of 2 and 1 pages";
  refused([](nlohmann::json& hs) { hs[0]["length"] = 4096; }, "do not tile");  // a gap
  refused([](nlohmann::json& hs) { hs[1]["at"] = 4096; }, "do not tile");      // an overlap
  refused([](nlohmann::json& hs) { hs.erase(1); }, "not at slot_bytes");
  refused([](nlohmann::json& hs) { hs[1]["at"] = 100; }, "4 KiB aligned");
  refused([](nlohmann::json& hs) { hs[1]["at"] = 1ull << 40; }, "inside the slot");
  refused(
      [](nlohmann::json& hs) {
        nlohmann::json copy = hs[0];
        copy["length"] = 4096;
        hs.push_back(copy);
      },
      "differ in length");
  std::ofstream(path) << good.dump(1);
  EXPECT_NO_THROW(engine("stream", 0.01, false));
}

// Rebalance turns whole records into stripes and back, from the homes alone, reading back
// exactly; files no manifest names are removed.
TEST_F(StoreTest, RebalanceStripesAndUnstripesFromTheHomes) {
  auto prompt = prompt_ids(6);
  const Outcome ref = resident_run(prompt, 6);
  prepare(3);
  const std::string aside = dir_ / "aside";
  fs::create_directories(aside);
  for (auto stripe : {store::PrepareOptions::Stripe::On, store::PrepareOptions::Stripe::Off,
                      store::PrepareOptions::Stripe::On}) {
    store::PrepareOptions opt;
    opt.rebalance = true;
    opt.measure = false;
    opt.stripe = stripe;
    opt.speeds = {1e8, 2e8, 1e8};
    // The checkpoint's tensors move away while prepare runs: only config.json (the identity) stays.
    for (const auto& f : fs::directory_iterator(model_dir()))
      if (f.path().extension() == ".safetensors") fs::rename(f.path(), aside + "/" + f.path().filename().string());
    const store::Manifest m = store::prepare_experts(model_dir(), model::expert_bank_of(model_dir()), opt);
    const size_t parts = stripe == store::PrepareOptions::Stripe::On ? 3 : 1;
    std::set<std::string> named;
    for (const auto& layer : m.holders)
      for (const auto& hs : layer) {
        if (!hs.empty()) {
          EXPECT_EQ(store::parts_of(hs).size(), parts);
        }
        for (const store::Holder& h : hs) named.insert(m.homes[size_t(h.home)].path + "/" + h.file);
      }
    for (int h = 0; h < 3; ++h)
      for (const auto& f : fs::recursive_directory_iterator(home(h)))
        if (f.is_regular_file() && f.path().extension() == ".bin") {
          EXPECT_TRUE(named.count(f.path().string())) << "left behind: " << f.path();
        }
    for (const auto& f : fs::directory_iterator(aside))
      fs::rename(f.path(), model_dir() + "/" + f.path().filename().string());
    auto e = engine("stream", double(slot_bytes()) * 9 / 1e9, true);
    Outcome got = run_engine(*e, prompt, 6);
    EXPECT_EQ(got.logits, ref.logits) << parts << " parts";
    EXPECT_EQ(got.tokens, ref.tokens) << parts << " parts";
  }
}

// The reader drops a striped prefetch only while no part of it is on a drive (a part in flight
// writes into the slot), and a dropped one leaves nothing behind.
TEST_F(StoreTest, ReaderCancelsAStripedReadOnlyBeforeAnyPartStarts) {
  const store::Manifest m = prepare_striped(2);
  const size_t slot = m.layout.slot_bytes;
  auto buf = allocate_touched(3 * slot, store::ExpertLayout::kAlign);
  store::ReaderOptions ro{.engine = "pread", .queue_depth = 1};
  store::ExpertReader r(m, ro);
  r.set_home_delay(0, 0.3);
  r.set_home_delay(1, 0.3);
  const uint64_t busy = r.submit(1, 0, buf.get(), false);  // both parts start at once
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const uint64_t queued = r.submit(1, 1, buf.get() + slot, false);
  EXPECT_FALSE(r.cancel(busy));
  EXPECT_TRUE(r.cancel(queued));
  EXPECT_NE(testing::error_of([&] { r.wait(queued); }).find("unknown"), std::string::npos);
  r.wait(busy);
  auto ref = allocate_touched(slot, store::ExpertLayout::kAlign);
  const store::Manifest one = prepare(1);  // the same records, whole on one home
  store::ExpertReader whole(one, store::ReaderOptions{.engine = "pread"});
  whole.wait(whole.submit(1, 0, ref.get()));
  EXPECT_EQ(std::memcmp(buf.get(), ref.get(), slot), 0) << "the striped read assembled another record";
  const auto stats = r.stats();
  EXPECT_EQ(stats[0].reads + stats[1].reads, 2u) << "the cancelled read reached a drive";
}

}  // namespace
}  // namespace sluice
