// Whole models on the GPU (cuda:0 and cuda-ref:0 when the machine has one; visible skips when it
// has not, as on CI): the exactness contract of the CUDA backend at the model level.
//  - cuda-ref's logits are the recorded cpu:scalar digests bit for bit, for every fixture and
//    default model, every pass kind (whole prompt, decode, verify + commit_prefix, DSpark);
//  - cuda matches the outside references (transformers, the K3 reference) within 1e-4 with the
//    same greedy tokens, a T-row pass equals T one-row passes bit for bit, two runs repeat bit for
//    bit, and a verify pass committed at a prefix continues exactly as the shorter run;
//  - drafting on == off and streamed == resident, through the engine, on cuda.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "golden_util.h"
#include "device/device.h"
#include "logit_digests.h"
#include "model/device_plan.h"
#include "model/registry.h"
#include "model_test_util.h"
#include "runtime/engine.h"

namespace sluice {
namespace {

bool have_gpu() {
  for (const std::string& n : device::available_devices())
    if (n.rfind("cuda", 0) == 0) return true;
  return false;
}
#define REQUIRE_GPU() \
  if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine (scripts/gpu-check.sh runs these on an H200)"

device::Device& gpu(const std::string& name) {
  static std::map<std::string, std::unique_ptr<device::Device>> open;
  auto& d = open[name];
  if (!d) d = device::open_device(name);
  return *d;
}

const char* const kFixtures[] = {"kimi_linear_a", "kimi_linear_b", "k3_tiny_a",     "k3_tiny_b",    "qwen3_a",
                                 "qwen3_b",       "qwen3_moe_a",   "qwen3_moe_b",   "gpt_oss_a",    "gpt_oss_b",
                                 "deepseek_v3_a", "kimi_k2_b",     "kimi_k2_int4"};

std::unique_ptr<model::Target> load_on(const std::string& dir, device::Device& d) {
  return model::load_target(model::LoadOptions{.dir = testing::src(dir), .device = &d});
}

TEST(GpuModel, CudaRefLogitsAreTheScalarCpuBits) {
  REQUIRE_GPU();
  const auto want = testing::recorded_digests();
  ASSERT_TRUE(want.count("scalar")) << "no recorded scalar digests";
  const bool defaults = testing::have_default_models();
  const testing::Digests d = testing::compute("scalar", &gpu("cuda-ref:0"), defaults);
  int same = 0, skipped = 0;
  for (const auto& [name, value] : want.at("scalar")) {
    auto it = d.got.find(name);
    if (!defaults && (name.rfind("default", 0) == 0 || name.rfind("dspark_default", 0) == 0) && it == d.got.end()) {
      ++skipped;
      continue;
    }
    ASSERT_NE(it, d.got.end()) << name << " was not computed on cuda-ref";
    EXPECT_EQ(it->second, value) << name << ": cuda-ref logits differ from cpu:scalar's";
    same += it->second == value;
  }
  EXPECT_GE(same, 84);  // the fixtures alone give 84 (108 with the default models)
  std::printf("[gpu] %d digests of cuda-ref bit-identical to cpu:scalar (%d of the default models not in this checkout)\n",
              same, skipped);
}

TEST(GpuModel, CudaMatchesTheOutsideReferences) {
  REQUIRE_GPU();
  for (const char* f : kFixtures) {
    const std::string dir = std::string("tests/fixtures/") + f;
    auto t = load_on(dir, gpu("cuda:0"));
    EXPECT_GE(testing::check_against_reference(*t, testing::src(dir + "/expected.safetensors"), std::string(f) + " on cuda"), 1);
  }
  if (testing::have_default_models()) {
    auto t = load_on("models/default/target", gpu("cuda:0"));
    testing::check_against_reference(*t, testing::src("tests/fixtures/default_target/expected.safetensors"),
                                     "default target on cuda");
  }
}

// T rows at once == T one-row passes, a second run == the first, and a verify pass of 4 rows
// committed at 2 continues exactly as a state that was fed only those 2 rows.
TEST(GpuModel, CudaRowsAreBatchInvariantRunsRepeatAndCommitPrefixIsTheShorterRun) {
  REQUIRE_GPU();
  for (const char* dir : {"tests/fixtures/k3_tiny_a", "tests/fixtures/kimi_linear_b", "tests/fixtures/qwen3_a",
                          "tests/fixtures/qwen3_moe_b", "tests/fixtures/gpt_oss_b", "tests/fixtures/deepseek_v3_a",
                          "tests/fixtures/kimi_k2_b", "tests/fixtures/kimi_k2_int4", "models/default/target"}) {
    SCOPED_TRACE(dir);
    if (!std::filesystem::exists(testing::src(dir) + "/config.json")) continue;  // models/ not in this checkout
    // Under compute-sanitizer (scripts/gpu-check.sh) one model is enough and the rest is slow.
    if (std::getenv("SLUICE_GPU_TEST_QUICK") && std::string(dir) != "tests/fixtures/k3_tiny_a") continue;
    auto t = load_on(dir, gpu("cuda:0"));
    const int64_t V = t->info().vocab_size;
    const std::vector<int32_t> ids = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46};
    auto all_rows = [&] {
      auto st = t->new_state();
      std::vector<float> lg(ids.size() * size_t(V));
      t->forward(*st, ids, model::PassOptions{.all_logits = true}, lg.data());
      return lg;
    };
    const std::vector<float> a = all_rows(), b = all_rows();
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4)) << "two runs differ";
    {
      auto st = t->new_state();
      std::vector<float> one(static_cast<size_t>(V));
      for (size_t i = 0; i < ids.size(); ++i) {
        t->forward(*st, std::span<const int32_t>(&ids[i], 1), model::PassOptions{}, one.data());
        EXPECT_EQ(0, std::memcmp(one.data(), a.data() + i * size_t(V), size_t(V) * 4))
            << "row " << i << " alone differs from row " << i << " of the " << ids.size() << "-row pass";
      }
    }
    // Verify 4 rows after a 6-token prefix, commit 2; then one row. Reference: 8 rows fed plainly.
    const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 6), rows = {ids[6], ids[7], 7, 9};
    std::vector<float> lg(4 * size_t(V)), got(static_cast<size_t>(V)), want(static_cast<size_t>(V));
    {
      auto st = t->new_state();
      t->forward(*st, prefix, model::PassOptions{}, lg.data());
      t->forward(*st, rows, model::PassOptions{.all_logits = true, .record = true}, lg.data());
      t->commit_prefix(*st, 2);
      t->forward(*st, std::span<const int32_t>(&ids[8], 1), model::PassOptions{}, got.data());
    }
    {
      auto st = t->new_state();
      t->forward(*st, std::span<const int32_t>(ids.data(), 9), model::PassOptions{}, want.data());
    }
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << "commit_prefix after a verify != the shorter run";
  }
}

// Kimi-K2-Thinking's INT4 experts (not among the recorded digests): cuda-ref gives cpu:scalar's
// logits bit for bit, resident and streamed from two homes through a few slots; cuda's streamed
// logits equal its resident ones bit for bit, with the device tier off (every expert copied from
// RAM at each use), holding every expert, and holding one (evictions, and misses passed through:
// the store hands out up to 3 experts a lease with its 4 RAM slots).
TEST(GpuModel, Int4ExpertsCudaRefIsScalarAndStreamedIsResident) {
  REQUIRE_GPU();
  const std::string fixture = testing::src("tests/fixtures/kimi_k2_int4");
  const std::vector<int32_t> ids = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 3, 14, 15};
  auto logits = [&](model::Target& t) {
    auto st = t.new_state();
    std::vector<float> lg(ids.size() * size_t(t.info().vocab_size));
    t.forward(*st, ids, model::PassOptions{.all_logits = true}, lg.data());
    return lg;
  };
  auto scalar_device = device::open_device("cpu:scalar");
  const std::vector<float> want = logits(*model::load_target(model::LoadOptions{.dir = fixture, .device = scalar_device.get()}));
  const std::vector<float> ref = logits(*load_on("tests/fixtures/kimi_k2_int4", gpu("cuda-ref:0")));
  EXPECT_EQ(0, std::memcmp(want.data(), ref.data(), want.size() * 4)) << "cuda-ref differs from cpu:scalar";
  const std::vector<float> fast = logits(*load_on("tests/fixtures/kimi_k2_int4", gpu("cuda:0")));
  double worst = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(double(fast[i]) - double(want[i])));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  std::printf("[gpu] kimi_k2_int4: cuda vs cpu:scalar logits max |diff| %.3g (max |logit| %.3g)\n", worst, scale);
  EXPECT_LE(worst, 1e-4 * scale);
  const uint64_t slot = model::expert_bank_of(fixture).layout.slot_bytes;
  for (const char* device : {"cuda-ref:0", "cuda:0"}) {
    for (const std::string& tier : {std::string("0"), std::string("auto"), std::to_string(1.0 * double(slot) / 1e9)}) {
      SCOPED_TRACE(::testing::Message() << device << ", --gpu-experts-gb " << tier);
      testing::TempDir dir("gpu-int4");
      std::filesystem::copy(fixture, dir / "m", std::filesystem::copy_options::recursive);
      std::filesystem::remove(dir / "m/expected.safetensors");
      auto streamed = testing::streamed_engine(dir, dir / "m", 4 * double(slot) / 1e9, device, tier);
      ASSERT_TRUE(streamed->streaming());
      const std::vector<float>& resident = std::string(device) == "cuda:0" ? fast : ref;
      for (int pass = 0; pass < 2; ++pass) {  // the second finds experts in the tier
        const std::vector<float> got = logits(streamed->model());
        EXPECT_EQ(0, std::memcmp(got.data(), resident.data(), got.size() * 4)) << "streamed != resident, pass " << pass;
      }
      const store::DeviceTier* t = streamed->tier();
      ASSERT_EQ(t != nullptr, tier != "0");
      if (!t) continue;
      const store::TierCounters& c = t->counters();
      EXPECT_EQ(c.requests, c.hits + c.copies + c.passthrough);
      if (tier == "auto") {  // every expert stays: the second pass hits only
        EXPECT_EQ(c.passthrough + c.evictions, 0u);
        EXPECT_EQ(c.hits, c.copies);
      } else {  // one slot, below a lease's experts
        EXPECT_GT(c.passthrough, 0u);
        EXPECT_GT(c.evictions, 0u);
      }
      std::printf("[gpu] kimi_k2_int4 streamed on %s, tier %s: %llu slots, %llu hits, %llu copies, %llu evictions, "
                  "%llu passed through\n", device, tier.c_str(), (unsigned long long)c.slots, (unsigned long long)c.hits,
                  (unsigned long long)c.copies, (unsigned long long)c.evictions, (unsigned long long)c.passthrough);
    }
  }
  // --cpu-experts: a third of each layer's experts computed by the CPU device in passes of a few
  // rows, the rest on cuda:0; a pass of all the rows (a prefill) computes every expert on cuda:0.
  // Decoding the rows one pass each (cpu:scalar's one-row passes equal its T-row pass bit for bit):
  // two runs give the same bits, the logits stay within the cuda tolerance of the resident ones.
  auto one_row_logits = [&](model::Target& t) {
    auto st = t.new_state();
    const size_t V = size_t(t.info().vocab_size);
    std::vector<float> lg(ids.size() * V);
    for (size_t i = 0; i < ids.size(); ++i) t.forward(*st, std::span<const int32_t>(&ids[i], 1), {}, lg.data() + i * V);
    return lg;
  };
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    testing::TempDir dir("gpu-int4-host");
    std::filesystem::copy(fixture, dir / "m", std::filesystem::copy_options::recursive);
    std::filesystem::remove(dir / "m/expected.safetensors");
    auto streamed =
        testing::streamed_engine(dir, dir / "m", 4 * double(slot) / 1e9, "cuda:0", "auto", std::to_string(1.0 / 3));
    const std::vector<float> prefill = logits(streamed->model());
    EXPECT_EQ(streamed->tier()->counters().on_host, 0u) << "a pass of " << ids.size() << " rows used the host's share";
    EXPECT_EQ(0, std::memcmp(prefill.data(), fast.data(), fast.size() * 4)) << "a long pass != resident cuda:0";
    const std::vector<float> got = one_row_logits(streamed->model());
    double off = 0;
    for (size_t i = 0; i < want.size(); ++i) off = std::max(off, std::fabs(double(got[i]) - double(want[i])));
    std::printf("[gpu] kimi_k2_int4 with a third of the experts on the CPU, one row a pass: vs cpu:scalar max |diff| "
                "%.3g, %llu experts on the host\n", off, (unsigned long long)streamed->tier()->counters().on_host);
    EXPECT_LE(off, 1e-4 * scale);
    EXPECT_GT(streamed->tier()->counters().on_host, 0u);
    if (run == 0) {
      first = got;
    } else {
      EXPECT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * 4)) << "two runs with --cpu-experts differ";
    }
  }
}

// The pinned staging ring (8 MiB in two halves) behind small uploads: uploads that fill a half to
// its last byte, many times over, each land intact. An exact fill used to leave the ring believing
// it was in the next half: it skipped that half's fence and, at the ring's end, indexed past its
// two events (a crash seen with --cpu-experts, whose rows are staged one by one).
TEST(GpuModel, UploadsThatFillTheStagingRingExactlyLandIntact) {
  REQUIRE_GPU();
  device::Device& d = gpu("cuda:0");
  constexpr int64_t n = 65536;  // 256 KiB: 16 fill a half exactly
  std::vector<device::Buf> bufs;
  std::vector<std::vector<float>> sent;
  for (int i = 0; i < 80; ++i) {
    bufs.push_back(d.alloc(device::BufType::F32, 1, n));
    sent.emplace_back(size_t(n));
    for (int64_t j = 0; j < n; ++j) sent.back()[size_t(j)] = float(i * 100000 + j);
    d.upload(bufs.back(), sent.back().data());
  }
  std::vector<float> got(static_cast<size_t>(n));
  for (size_t i = 0; i < bufs.size(); ++i) {
    d.download(bufs[i], got.data());
    EXPECT_EQ(got, sent[i]) << "upload " << i;
    d.free(bufs[i]);
  }
}

std::vector<int32_t> engine_greedy(runtime::EngineOptions o, const std::vector<int32_t>& prompt, int64_t n) {
  auto e = runtime::Engine::load(o);
  auto s = e->new_session(false);
  return s->generate(prompt, runtime::GenerateOptions{.max_new = n, .stop_at_eos = false}).generated;
}

TEST(GpuModel, DraftingAndStreamingChangeNothingOnCuda) {
  REQUIRE_GPU();
  const std::vector<int32_t> prompt = {5, 17, 99, 3, 250, 7, 64, 12, 5, 17, 99, 3};
  runtime::EngineOptions o;
  o.model_dir = testing::src("tests/fixtures/k3_tiny_a");
  o.device = "cuda:0";
  o.experts = "resident";
  const std::vector<int32_t> plain = engine_greedy(o, prompt, 40);
  for (const std::string& draft : std::vector<std::string>{"ngram", "model:" + testing::src("tests/fixtures/kimi_linear_b"),
                                                           "dspark:" + testing::src("tests/fixtures/dspark_tiny")}) {
    runtime::EngineOptions d = o;
    d.draft = draft;
    EXPECT_EQ(engine_greedy(d, prompt, 40), plain) << "greedy tokens with --draft " << draft << " differ on cuda";
  }
  runtime::EngineOptions cpu = o;
  cpu.device = "cpu";
  const std::vector<int32_t> on_cpu = engine_greedy(cpu, prompt, 40);
  size_t agree = 0;
  while (agree < plain.size() && plain[agree] == on_cpu[agree]) ++agree;
  std::printf("[gpu] k3_tiny_a greedy: cuda and cpu agree on the first %zu of %zu tokens\n", agree, plain.size());

  // Streamed == resident on cuda: a tiny K3 with its experts on two homes and a handful of slots.
  testing::TempDir dir("gpu-stream");
  model::write_tiny_checkpoint(testing::streamed_tiny_spec(), dir / "m");
  runtime::EngineOptions r;
  r.model_dir = dir / "m";
  r.device = "cuda:0";
  r.experts = "resident";
  const std::vector<int32_t> resident = engine_greedy(r, prompt, 24);
  auto streamed = testing::streamed_engine(dir, dir / "m", 12 * 4096 * 3 / 1e9, "cuda:0");
  auto s = streamed->new_session(false);
  EXPECT_EQ(s->generate(prompt, runtime::GenerateOptions{.max_new = 24, .stop_at_eos = false}).generated, resident)
      << "streamed experts change the greedy tokens on cuda";
  ASSERT_TRUE(streamed->streaming());
  runtime::EngineOptions rd = r;
  rd.draft = "ngram";
  EXPECT_EQ(engine_greedy(rd, prompt, 24), resident) << "drafting changes the tiny K3's greedy tokens on cuda";
}

// The memory plan runs before any weight is copied; its decision and message are host logic,
// checked here on every machine, and a real GPU must report memory for it to work with.
TEST(DevicePlan, RefusesWhatDoesNotFitWithTheNumbersAndWhatToDo) {
  constexpr size_t GiB = size_t(1) << 30;
  const device::Device::MemoryInfo gpu80{.free = 80 * GiB, .total = 96 * GiB};
  EXPECT_EQ(model::device_plan_refusal("cuda:0", gpu80, {.spine_bytes = 40 * GiB, .expert_bytes = 30 * GiB}), "");
  EXPECT_EQ(model::device_plan_refusal("cpu", {}, {.spine_bytes = 4000 * GiB}), "") << "the CPU has no plan to check";
  const std::string experts = model::device_plan_refusal("cuda:0", gpu80, {.spine_bytes = 40 * GiB, .expert_bytes = 60 * GiB});
  EXPECT_NE(experts.find("needs 101.00 GiB (spine 40.00 GiB, resident experts 60.00 GiB, working memory 1.00 GiB)"),
            std::string::npos) << experts;
  EXPECT_NE(experts.find("80.00 GiB of 96.00 GiB is free"), std::string::npos) << experts;
  EXPECT_NE(experts.find("--experts stream"), std::string::npos) << experts;
  const std::string spine = model::device_plan_refusal("cuda:0", gpu80, {.spine_bytes = 79 * GiB + GiB / 2});
  EXPECT_NE(spine.find("spine alone does not fit"), std::string::npos) << spine;
  EXPECT_EQ(spine.find("resident experts"), std::string::npos) << spine;
  if (have_gpu()) {
    const device::Device::MemoryInfo m = gpu("cuda:0").memory();
    EXPECT_GT(m.total, 0u);
    EXPECT_GT(m.free, 0u);
    EXPECT_LE(m.free, m.total);
  }
}

}  // namespace
}  // namespace sluice
