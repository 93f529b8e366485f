// The streaming expert store against the all-in-RAM path: bit-identical logits and tokens for
// 1-3 homes, caches so small they evict every layer, prefetch on and off, both read engines;
// read-once passes; throttled, missing and corrupt homes; foreign manifests and homes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <map>
#include <thread>

#include "core/arena.h"
#include "core/error.h"
#include "error_of.h"
#include "model/registry.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
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
  std::unique_ptr<runtime::Engine> engine(const std::string& experts, double cache_gb, bool prefetch,
                                          const std::string& reader = "auto") {
    runtime::EngineOptions o;
    o.model_dir = model_dir();
    o.experts = experts;
    o.cache_gb = cache_gb;
    o.prefetch = prefetch;
    o.prefetch_precision = 0;  // with prefetch on, read every guess (the random routers' never earn the default)
    o.reader = reader;
    return runtime::Engine::load(o);
  }
  void write_uniform_heat() {
    auto c = format::load_kimi_config(model_dir());
    store::Heat h(c.num_layers, c.num_experts);
    for (int l = 0; l < c.num_layers; ++l) {
      std::vector<int32_t> all;
      for (int e = 0; e < c.num_experts; ++e) all.push_back(e);
      h.record(l, all.data(), all.size());
    }
    h.save(store::heat_path(model_dir()));
  }
  uint64_t slot_bytes() {
    return model::expert_bank_of(model_dir()).layout.slot_bytes;
  }
  testing::TempDir dir_{"store"};
};

TEST_F(StoreTest, StreamedRunsAreBitIdenticalToResident) {
  auto prompt = prompt_ids(10);
  Outcome ref;
  {
    auto e = engine("resident", 1, false);
    ref = run_engine(*e, prompt, 10);
  }
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
  Outcome ref;
  {
    auto e = engine("resident", 1, false);
    ref = run_engine(*e, prompt, 6);
  }
  prepare(1);
  runtime::EngineOptions o;
  o.model_dir = model_dir();
  o.experts = "stream";
  o.cache_gb = double(slot_bytes()) * 24 / 1e9;
  o.reader = "pread";
  o.prefetch_precision = 0;  // read every guess (a random router's guesses never earn the default)
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
    s.prefetch(1, guess);
    s.begin(1, asked);
    kernels::ExpertView v;
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
  s2.prefetch(1, guess);
  EXPECT_EQ(s2.counters().prefetch_issued, 2u);
  EXPECT_EQ(s2.counters().prefetch_suppressed, 0u);
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
  Outcome ref;
  {
    auto e = engine("resident", 1, false);
    ref = run_engine(*e, prompt, 8);
  }
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
  Outcome ref;
  {
    auto e = engine("resident", 1, false);
    ref = run_engine(*e, prompt, 5);
  }
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
  // Flip bytes in every record of home 0.
  for (const auto& entry : fs::recursive_directory_iterator(home(0))) {
    if (entry.path().extension() != ".bin") continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
    for (uint64_t off = 100; off < fs::file_size(entry.path()); off += m.layout.slot_bytes) {
      f.seekp(long(off));
      f.put('\x5a');
    }
  }
  auto prompt = prompt_ids(6);
  Outcome ref;
  {
    auto e = engine("resident", 1, false);
    ref = run_engine(*e, prompt, 6);
  }
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
  Outcome ref;
  {
    auto e = engine("resident", 1, false);
    ref = run_engine(*e, prompt, 6);
  }
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

}  // namespace
}  // namespace sluice
