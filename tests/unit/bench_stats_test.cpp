// Tests of the benchmark statistics: summaries, ratios, steady vs inclusive speed from event logs,
// accounting checks, output checks (invalid runs are excluded), A B B A rotation and arm parsing.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/harness.h"
#include "bench/stats.h"
#include "core/error.h"

namespace sluice::bench {
namespace {

using nlohmann::json;

TEST(BenchStats, SummaryOddEvenAndNaN) {
  Summary s = summarize({3, 1, 2});
  EXPECT_EQ(s.n, 3);
  EXPECT_DOUBLE_EQ(s.median, 2);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 2);
  s = summarize({4, 1, 3, 2, NAN});
  EXPECT_EQ(s.n, 4);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.max, 4);
  s = summarize({});
  EXPECT_EQ(s.n, 0);
  EXPECT_TRUE(std::isnan(s.median));
}

TEST(BenchStats, RatioRefusesZeroAndNaN) {
  EXPECT_DOUBLE_EQ(ratio(3, 2), 1.5);
  EXPECT_TRUE(std::isnan(ratio(1, 0)));
  EXPECT_TRUE(std::isnan(ratio(NAN, 1)));
}

// A run of 5 tokens: the first at 2 s after run start, the last at 6 s; process wall 10 s.
std::vector<json> five_token_run(bool with_t_ms) {
  std::vector<json> ev;
  ev.push_back({{"event", "run_start"}, {"prompt_ids", {1, 2, 3}}});
  json p = {{"event", "prefill_done"}, {"duration_ms", 2000.0}, {"emitted", {7}}, {"proposed", 0}, {"accepted", 0},
            {"expert_bytes_read", 1000}};
  if (with_t_ms) p["t_ms"] = 2000.0;
  ev.push_back(p);
  double t = 2000;
  for (int k = 0; k < 2; ++k) {
    t += 2000;
    // Two tokens per step: one drafted token accepted (of 2 proposed) plus the target's own.
    json d = {{"event", "decode_step"}, {"duration_ms", 2000.0}, {"emitted", {8, 9}}, {"proposed", 2}, {"accepted", 1},
              {"expert_bytes_read", 400}};
    if (with_t_ms) d["t_ms"] = t;
    ev.push_back(d);
  }
  json home = {{"path", "/h0"}, {"reads", 3}, {"bytes", 600}};
  json store = {{"hit_rate", 0.25}, {"prefetch_recall", 0.5}, {"homes", json::array({home})}};
  json end = {{"event", "run_end"}, {"status", "ok"}, {"stop_reason", "max_new"}, {"wall_ms", 6500.0}};
  end["completion_ids"] = {7, 8, 9, 8, 9};
  end["stats"] = {{"expert_requests", 12}, {"store", store}};
  ev.push_back(end);
  return ev;
}

TEST(BenchStats, SteadyAndInclusiveDefinitions) {
  for (bool t_ms : {false, true}) {
    RunMetrics m = metrics_from_events(five_token_run(t_ms), 10.0);
    ASSERT_TRUE(m.valid) << m.invalid_reason;
    EXPECT_EQ(m.generated, 5);
    EXPECT_DOUBLE_EQ(m.ttft_s, 2.0);
    EXPECT_DOUBLE_EQ(m.decode_s, 4.0);
    EXPECT_DOUBLE_EQ(m.steady_tps, 1.0);     // (5 - 1) / (6 - 2)
    EXPECT_DOUBLE_EQ(m.inclusive_tps, 0.5);  // 5 / 10 s of process wall time
    EXPECT_DOUBLE_EQ(m.load_s, 3.5);         // 10 - 6.5
    EXPECT_EQ(m.proposed, 4);
    EXPECT_EQ(m.accepted, 2);
    EXPECT_DOUBLE_EQ(m.acceptance, 0.5);
    EXPECT_EQ(m.prefill_bytes, 1000u);
    EXPECT_EQ(m.decode_bytes, 800u);
    EXPECT_DOUBLE_EQ(m.bytes_per_token, 200.0);
    EXPECT_DOUBLE_EQ(m.decode_read_bytes_per_s, 200.0);
    EXPECT_DOUBLE_EQ(m.hit_rate, 0.25);
    EXPECT_DOUBLE_EQ(m.prefetch_recall, 0.5);
    EXPECT_EQ(m.expert_requests, 12);
    ASSERT_EQ(m.homes.size(), 1u);
    EXPECT_DOUBLE_EQ(m.homes[0].bytes_per_s, 100.0);  // 600 bytes over 6 s of engine time
  }
}

// A GPU host's runs log each step's share of the device tier's work: the decode steps' figures are
// summed apart from the prefill's, and a run without them has no tier.
TEST(BenchStats, GpuTierWorkSplitsIntoPrefillAndDecode) {
  auto ev = five_token_run(true);
  EXPECT_FALSE(metrics_from_events(ev, 10.0).gpu_tier);
  ev[1]["gpu_tier"] = {{"requests", 96}, {"hits", 0}, {"bytes_copied", 5000}, {"on_host", 0}};
  ev[2]["gpu_tier"] = {{"requests", 16}, {"hits", 4}, {"bytes_copied", 300}, {"on_host", 8}};
  ev[3]["gpu_tier"] = {{"requests", 16}, {"hits", 6}, {"bytes_copied", 100}, {"on_host", 7}};
  const RunMetrics m = metrics_from_events(ev, 10.0);
  ASSERT_TRUE(m.valid) << m.invalid_reason;
  EXPECT_TRUE(m.gpu_tier);
  EXPECT_EQ(m.prefill_tier_bytes, 5000u);
  EXPECT_EQ(m.decode_tier_requests, 32u);
  EXPECT_EQ(m.decode_tier_hits, 10u);
  EXPECT_EQ(m.decode_on_host, 15u);
  EXPECT_EQ(m.decode_tier_bytes, 400u);
}

TEST(BenchStats, BrokenAccountingIsInvalid) {
  auto ev = five_token_run(false);
  ev[2]["accepted"] = 0;  // two tokens emitted with nothing accepted
  RunMetrics m = metrics_from_events(ev, 10);
  EXPECT_FALSE(m.valid);
  EXPECT_NE(m.invalid_reason.find("emitted 2"), std::string::npos) << m.invalid_reason;

  ev = five_token_run(false);
  ev.pop_back();  // the process died before run_end
  m = metrics_from_events(ev, 10);
  EXPECT_FALSE(m.valid);
  EXPECT_NE(m.invalid_reason.find("run_end"), std::string::npos);

  ev = five_token_run(false);
  ev.back()["completion_ids"] = {7, 8};
  EXPECT_FALSE(metrics_from_events(ev, 10).valid);
}

TEST(BenchStats, OutputMismatchExcludesRun) {
  RunMetrics a, b, c, d;
  a.output = {1, 2, 3};
  b.output = {1, 2, 4};
  c.output = {1, 2, 3};
  d.valid = false;  // already invalid: not the reference
  d.output = {9};
  a.steady_tps = 1;
  b.steady_tps = 100;  // a mismatching run must not move the median
  c.steady_tps = 3;
  std::vector<RunMetrics*> runs = {&d, &a, &b, &c};
  auto ref = check_outputs(runs, nullptr);
  EXPECT_EQ(ref, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_TRUE(a.valid);
  EXPECT_FALSE(b.valid);
  EXPECT_NE(b.invalid_reason.find("token 2"), std::string::npos) << b.invalid_reason;
  EXPECT_TRUE(c.valid);
  ArmSummary s = summarize_arm("x", {&a, &b, &c, &d}, nullptr);
  EXPECT_EQ(s.runs, 4);
  EXPECT_EQ(s.valid, 2);
  EXPECT_DOUBLE_EQ(s.steady_tps.median, 2);
  EXPECT_DOUBLE_EQ(s.steady_tps.max, 3);
  EXPECT_DOUBLE_EQ(s.steady_ratio, 1);

  std::vector<int32_t> expected = {1, 2, 4};
  a.valid = b.valid = c.valid = true;
  check_outputs(runs, &expected);
  EXPECT_FALSE(a.valid);
  EXPECT_TRUE(b.valid);
  EXPECT_FALSE(c.valid);
}

TEST(BenchStats, RatioToFirstArm) {
  RunMetrics x, y;
  x.steady_tps = 2;
  x.inclusive_tps = 1;
  x.ttft_s = 4;
  y.steady_tps = 3;
  y.inclusive_tps = 1.5;
  y.ttft_s = 2;
  ArmSummary a = summarize_arm("a", {&x}, nullptr);
  ArmSummary b = summarize_arm("b", {&y}, &a);
  EXPECT_DOUBLE_EQ(b.steady_ratio, 1.5);
  EXPECT_DOUBLE_EQ(b.inclusive_ratio, 1.5);
  EXPECT_DOUBLE_EQ(b.ttft_ratio, 0.5);
  EXPECT_DOUBLE_EQ(a.steady_ratio, 1);
}

TEST(BenchHarness, RotationIsABBA) {
  EXPECT_EQ(rotation(2, 0), (std::vector<int>{0, 1}));
  EXPECT_EQ(rotation(2, 1), (std::vector<int>{1, 0}));
  EXPECT_EQ(rotation(3, 2), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(rotation(3, 3), (std::vector<int>{2, 1, 0}));
}

TEST(BenchHarness, ArmParsing) {
  ArmSpec a = parse_arm("drafts:--draft ngram --cache-gb 0.5 --model '/x y/m'");
  EXPECT_EQ(a.name, "drafts");
  EXPECT_EQ(a.flags, (std::vector<std::string>{"--draft", "ngram", "--cache-gb", "0.5", "--model", "/x y/m"}));
  EXPECT_EQ(arm_model(a, "/base"), "/x y/m");
  EXPECT_EQ(arm_model(parse_arm("plain:"), "/base"), "/base");
  EXPECT_TRUE(parse_arm("plain").flags.empty());
  EXPECT_THROW(parse_arm(":--x"), Error);
  EXPECT_THROW(parse_arm("a b:--x"), Error);
  EXPECT_THROW(parse_arm("a:--events f"), Error);
  EXPECT_THROW(parse_arm("a:'open"), Error);
}

TEST(BenchHarness, PeerArmsAndMemoryLimits) {
  ArmSpec p = parse_arm("llama:--peer 'node bench/peer/llama.mjs' --model /m/x.gguf --threads 2");
  EXPECT_EQ(p.peer, (std::vector<std::string>{"node", "bench/peer/llama.mjs"}));
  EXPECT_TRUE(p.binary.empty());
  EXPECT_EQ(p.flags, (std::vector<std::string>{"--model", "/m/x.gguf", "--threads", "2"}));
  EXPECT_EQ(arm_model(p, "/base"), "/m/x.gguf");
  EXPECT_THROW(parse_arm("llama:--peer node"), Error);  // a peer runs its own model
  EXPECT_THROW(parse_arm("llama:--peer"), Error);
  EXPECT_THROW(parse_arm("llama:--peer '' --model x"), Error);
  EXPECT_THROW(parse_arm("llama:--peer node --binary /b --model x"), Error);
  BenchOptions o;
  parse_memory_limit("600M", o);
  EXPECT_EQ(o.memory_limit_bytes, 600'000'000u);
  EXPECT_EQ(o.memory_limit_fraction, 0);
  parse_memory_limit("0.333x", o);
  EXPECT_EQ(o.memory_limit_bytes, 0u);
  EXPECT_DOUBLE_EQ(o.memory_limit_fraction, 0.333);
  for (const char* bad : {"x", "0x", "-1x", "abc", "1M", "0.3y"}) EXPECT_THROW(parse_memory_limit(bad, o), Error) << bad;
}

TEST(BenchStats, AgreementIsPrefixAndSamePositionShare) {
  Agreement a = agreement({1, 2, 3, 4, 5, 6}, {1, 2, 3, 9, 5, 6});
  EXPECT_EQ(a.prefix, 3u);
  EXPECT_DOUBLE_EQ(a.share, 5.0 / 6.0);
  a = agreement({1, 2, 3}, {1, 2, 3, 4});  // a longer output: the extra position is no match
  EXPECT_EQ(a.prefix, 3u);
  EXPECT_DOUBLE_EQ(a.share, 0.75);
  a = agreement({7}, {8});
  EXPECT_EQ(a.prefix, 0u);
  EXPECT_DOUBLE_EQ(a.share, 0.0);
  EXPECT_DOUBLE_EQ(agreement({}, {}).share, 1.0);
}

TEST(BenchHarness, ArmWithAnotherBinary) {
  ArmSpec a = parse_arm("old:--binary /opt/old/sluice --no-prefetch");
  EXPECT_EQ(a.binary, "/opt/old/sluice");
  EXPECT_EQ(a.flags, (std::vector<std::string>{"--no-prefetch"}));
  EXPECT_TRUE(parse_arm("new:--no-prefetch").binary.empty());
  EXPECT_THROW(parse_arm("old:--binary"), Error);
}

}  // namespace
}  // namespace sluice::bench
