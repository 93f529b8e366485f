// The MoE architectures of issue 17 (qwen3_moe, gpt_oss, deepseek_v3 with FP8, kimi_k2, and kimi_k2
// with Kimi-K2-Thinking's compressed-tensors INT4 routed experts) on the committed tiny checkpoints (tools/fixtures/make_moe_checkpoints.sh): transformers' logits and
// greedy tokens (tools/fixtures/make_moe_fixtures.py), streamed from two homes through a tiny cache
// equal to resident bit for bit, a T-row pass equal to T one-row passes, drafting on equal to
// off, and checkpoints and configs that must be refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"
#include "model/arch/deepseek_config.h"
#include "model/arch/gpt_oss_config.h"
#include "format/quantization.h"
#include "model/arch/qwen3_config.h"
#include "format/safetensors.h"
#include "golden_util.h"
#include "model/registry.h"
#include "model/tensor_list.h"
#include "model/tiny_checkpoint.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/speculate/drafter.h"
#include "runtime/speculate/model_drafter.h"
#include "store/prepare.h"
#include "store/resident_experts.h"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kFixtures = {"qwen3_moe_a", "qwen3_moe_b",   "gpt_oss_a", "gpt_oss_b",
                                            "deepseek_v3_a", "kimi_k2_b", "kimi_k2_int4"};

std::string fixture_dir(const std::string& name) { return std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/" + name; }

std::vector<int32_t> prompt_of(int n, int64_t vocab, int salt = 0) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back(int32_t((i * 37 + salt * 11 + 5) % (vocab - 3)));
  for (int i = 0; i < n / 2; ++i) p.push_back(p[size_t(i)]);  // a repeat for prompt lookup
  return p;
}

using testing::all_logits;

class MoeArch : public ::testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return fixture_dir(GetParam()); }
};

TEST_P(MoeArch, LogitsAndGreedyTokensMatchTransformers) {
  const std::string expected = dir() + "/expected.safetensors";
  ASSERT_TRUE(fs::exists(expected)) << "missing fixture " << expected << " (tools/fixtures/run_moe_on_device.sh)";
  auto m = model::load_target(dir());
  EXPECT_GE(testing::check_against_reference(*m, expected, GetParam()), 2);
}

TEST_P(MoeArch, MultiRowPassEqualsOneRowPassesBitForBit) {
  auto m = model::load_target(dir());
  const int64_t V = m->info().vocab_size;
  const auto prompt = prompt_of(9, V);
  auto whole = m->new_state();
  std::vector<float> a(prompt.size() * size_t(V));
  std::vector<float> b(static_cast<size_t>(V));
  m->forward(*whole, prompt, model::PassOptions{.all_logits = true}, a.data());
  auto rows = m->new_state();
  for (size_t t = 0; t < prompt.size(); ++t) {
    m->forward(*rows, std::span<const int32_t>(&prompt[t], 1), model::PassOptions{}, b.data());
    ASSERT_EQ(0, std::memcmp(b.data(), a.data() + t * size_t(V), size_t(V) * 4)) << "row " << t;
  }
  EXPECT_EQ(m->state_values(*whole), m->state_values(*rows));
}

TEST_P(MoeArch, DraftingOnEqualsOff) {
  auto m = model::load_target(dir());
  const int64_t V = m->info().vocab_size;
  // A draft model over the same ids: a random tiny Qwen3 of the target's vocabulary.
  testing::TempDir tmp("moe-draft");
  model::TinyQwen3Spec ds;
  ds.vocab = V;
  ds.layers = 2;
  ds.seed = 77;
  model::write_tiny_qwen3_checkpoint(ds, tmp / "draft");
  runtime::ModelDrafter model_drafter(model::load_target(tmp / "draft"), V);
  for (int salt = 0; salt < 3; ++salt) {
    const auto prompt = prompt_of(8 + 3 * salt, V, salt);
    auto st = m->new_state();
    const auto ref = runtime::generate(*m, *st, prompt, {.max_new = 14, .stop_at_eos = false}).generated;
    ASSERT_EQ(ref.size(), 14u);
    runtime::NgramDrafter ngram;
    for (runtime::Drafter* d : std::initializer_list<runtime::Drafter*>{&ngram, &model_drafter})
      for (int depth : {-1, 1, 4}) {
        auto st2 = m->new_state();
        const auto got =
            runtime::generate(*m, *st2, prompt, {.max_new = 14, .stop_at_eos = false, .drafter = d, .fixed_depth = depth})
                .generated;
        EXPECT_EQ(got, ref) << d->name() << " depth " << depth << " prompt " << salt;
      }
  }
}

TEST_P(MoeArch, StreamedFromTwoHomesThroughATinyCacheEqualsResident) {
  testing::TempDir tmp("moe-stream");
  const std::string model = tmp / "model";
  fs::copy(dir(), model, fs::copy_options::recursive);
  fs::remove(model + "/expected.safetensors");
  const auto bank = model::expert_bank_of(model);
  ASSERT_FALSE(bank.empty());
  store::PrepareOptions popt;
  popt.homes = {store::parse_home_spec(tmp / "home0"), store::parse_home_spec(tmp / "home1")};
  popt.measure = false;
  store::prepare_experts(model, bank, popt);
  auto engine = [&](const std::string& experts, double cache_gb, bool prefetch, int layers = 1) {
    runtime::EngineOptions o;
    o.model_dir = model;
    o.experts = experts;
    o.cache_gb = cache_gb;
    o.stream.prefetch = prefetch;
    o.stream.prefetch_layers = layers;
    // Two layers ahead: read every guess (a random router's never earn the default precision).
    if (layers > 1) o.stream.prefetch_min_precision = 0;
    return runtime::Engine::load(o);
  };
  auto resident = engine("resident", 1, false);
  const int64_t V = resident->info().vocab_size;
  const auto prompt = prompt_of(10, V);
  const auto ref = all_logits(resident->model(), prompt);
  auto st = resident->model().new_state();
  const auto ref_tokens =
      runtime::generate_greedy(resident->model(), *st, prompt, {.max_new = 10, .stop_at_eos = false}).generated;
  // Fewer slots than one layer's experts: every layer evicts.
  const double tiny = double(bank.layout.slot_bytes) * double(std::max<int64_t>(2, bank.num_experts / 3)) / 1e9;
  for (int layers : {0, 1, 2}) {
    SCOPED_TRACE(::testing::Message() << "prefetch layers " << layers);
    auto e = engine("stream", tiny, layers > 0, std::max(layers, 1));
    ASSERT_TRUE(e->streaming());
    EXPECT_EQ(all_logits(e->model(), prompt), ref);
    auto st2 = e->model().new_state();
    EXPECT_EQ(runtime::generate_greedy(e->model(), *st2, prompt, {.max_new = 10, .stop_at_eos = false}).generated,
              ref_tokens);
    EXPECT_GT(e->store()->counters().misses, 0);
  }
}

// With a provider that asks for them, the model hands over guesses at the next layer's routes and
// the one after's, for every MoE layer that has such layers before it, and its logits do not move.
TEST_P(MoeArch, HandsGuessesTwoLayersAheadWhenTheProviderAsks) {
  auto m = model::load_target(dir());
  const auto prompt = prompt_of(6, m->info().vocab_size);
  const auto ref = all_logits(*m, prompt);
  store::ExpertProvider* resident = m->expert_provider();
  ASSERT_NE(resident, nullptr);
  testing::AskTwoLayersAhead ask(resident);
  m->set_expert_provider(&ask);
  const auto got = all_logits(*m, prompt);
  m->set_expert_provider(resident);
  EXPECT_EQ(got, ref);
  EXPECT_EQ(ask.handed, testing::guesses_two_layers_ahead(m->expert_bank()->moe_layers));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MoeArch, ::testing::ValuesIn(kFixtures),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

// ---- refusals ----

std::string load_error(const std::string& d) {
  try {
    model::load_target(d);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void write_json(const std::string& path, const json& j) { std::ofstream(path) << j.dump(2); }

// Rewrites one tensor of a single-file checkpoint (its other tensors kept).
void rewrite_tensors(const std::string& d, const std::function<void(std::vector<format::TensorToWrite>&)>& edit) {
  const std::string path = d + "/model.safetensors";
  std::vector<format::TensorToWrite> ts;
  {
    auto f = format::SafetensorsFile::open(path);
    for (const auto& t : f->tensors()) {
      format::TensorToWrite w{t.name, t.dtype, t.shape, {}};
      w.bytes.assign(reinterpret_cast<const std::byte*>(t.data), reinterpret_cast<const std::byte*>(t.data) + t.nbytes);
      ts.push_back(std::move(w));
    }
  }
  edit(ts);
  format::write_safetensors(path, ts, {{"format", "pt"}});
}

TEST(MoeArchRefusals, BadFp8CheckpointsNameTheTensor) {
  struct Case {
    const char* what;
    std::function<void(std::vector<format::TensorToWrite>&)> edit;
    std::vector<std::string> want;
  };
  const std::string scale = "model.layers.0.self_attn.o_proj.weight_scale_inv";
  const std::vector<Case> cases = {
      {"missing scale",
       [&](auto& ts) { std::erase_if(ts, [&](const auto& t) { return t.name == scale; }); },
       {"model.layers.0.self_attn.o_proj.weight", "weight_scale_inv"}},
      {"wrong scale grid",
       [&](auto& ts) {
         for (auto& t : ts)
           if (t.name == scale) t.shape = {t.shape[1], t.shape[0]};
       },
       {scale, "config implies"}},
      {"bf16 scales",
       [&](auto& ts) {
         for (auto& t : ts)
           if (t.name == scale) {
             t.dtype = DType::BF16;
             t.bytes.resize(t.bytes.size() / 2);
           }
       },
       {scale, "F32"}},
      {"negative scale",
       [&](auto& ts) {
         for (auto& t : ts)
           if (t.name == scale) {
             const float neg = -1.0f;
             std::memcpy(t.bytes.data(), &neg, 4);
           }
       },
       {scale, "finite and positive"}},
      {"bad expert scale",
       [&](auto& ts) {
         for (auto& t : ts)
           if (t.name == "model.layers.1.mlp.experts.3.up_proj.weight_scale_inv") {
             const float nan = std::nanf("");
             std::memcpy(t.bytes.data(), &nan, 4);
           }
       },
       {"expert 3 of layer 1", "up_proj.weight_scale_inv"}},
  };
  for (const Case& c : cases) {
    testing::TempDir tmp("fp8-bad");
    const std::string d = tmp / "m";
    fs::copy(fixture_dir("deepseek_v3_a"), d, fs::copy_options::recursive);
    rewrite_tensors(d, c.edit);
    const std::string msg = load_error(d);
    EXPECT_FALSE(msg.empty()) << c.what << ": accepted";
    for (const auto& w : c.want) EXPECT_NE(msg.find(w), std::string::npos) << c.what << ": '" << msg << "' lacks " << w;
  }
}

// make-tiny's FP8 weights are e4m3 codes of N(0, 16²) rounded to the nearest code, drawn by the
// inverse of that distribution: over every FP8 weight of a small DeepSeek-V3, each code's share is
// within 5 standard errors of its probability (from erf, computed here on its own), signs are
// even, and the same seed writes the same bytes while another seed does not.
TEST(MoeArchFp8, MakeTinyCodesFollowTheirDistribution) {
  testing::TempDir tmp("fp8-tiny");
  model::TinyMoeSpec s{.arch = "deepseek_v3", .hidden = 256, .layers = 2, .moe_inter = 128, .fp8 = true};
  model::write_tiny_moe_checkpoint(s, tmp / "a");
  model::write_tiny_moe_checkpoint(s, tmp / "b");
  s.seed = 2;
  model::write_tiny_moe_checkpoint(s, tmp / "c");
  const format::TensorSet a = format::TensorSet::open_dir(tmp / "a"), b = format::TensorSet::open_dir(tmp / "b"),
                          c = format::TensorSet::open_dir(tmp / "c");
  std::vector<double> count(256, 0.0);
  double n = 0;
  for (const auto& [name, t] : a.all()) {
    if (t->dtype != DType::F8_E4M3) continue;
    const auto& tb = b.get(name);
    const auto& tc = c.get(name);
    ASSERT_EQ(t->nbytes, tb.nbytes);
    EXPECT_EQ(std::memcmp(t->data, tb.data, t->nbytes), 0) << name << ": the same seed wrote other bytes";
    EXPECT_NE(std::memcmp(t->data, tc.data, t->nbytes), 0) << name << ": another seed wrote the same bytes";
    for (size_t i = 0; i < t->nbytes; ++i) count[size_t(t->data[i])] += 1;
    n += double(t->nbytes);
  }
  ASSERT_GT(n, 1e6);
  auto p_below = [](double x) { return 0.5 * std::erfc(-x / (16.0 * std::sqrt(2.0))); };  // P(N(0, 16²) < x)
  double negative = 0;
  for (int code = 0; code < 256; ++code) {
    const int mag = code & 0x7f;
    if (mag == 0x7f) {
      EXPECT_EQ(count[size_t(code)], 0) << "NaN code " << code;
      continue;
    }
    if (code & 0x80) negative += count[size_t(code)];
    // The interval of x that rounds to this magnitude, on one side.
    const double v = e4m3_to_f32(uint8_t(mag));
    const double lo = mag == 0 ? 0 : 0.5 * (v + e4m3_to_f32(uint8_t(mag - 1)));
    const double hi = mag == 0x7e ? 1e9 : 0.5 * (v + e4m3_to_f32(uint8_t(mag + 1)));
    const double p = (p_below(hi) - p_below(lo));  // one sign's share: P(lo <= x < hi)
    const double se = std::sqrt(n * p * (1 - p)) + 1;
    EXPECT_NEAR(count[size_t(code)], n * p, 5 * se) << "code " << code << " (" << v << ")";
  }
  EXPECT_NEAR(negative / n, 0.5, 5 * 0.5 / std::sqrt(n));
}

// The loaders mark FP8 weights whose codes they checked (kernels skip their NaN scan for them): a
// released-format weight is marked; one NaN code leaves that weight unmarked, so its rows still
// come out NaN as the scalar kernel's, and its neighbours marked.
TEST(MoeArchFp8, LoadersMarkCheckedWeightsOnly) {
  const std::string o = "model.layers.0.self_attn.o_proj.weight", q = "model.layers.0.self_attn.q_a_proj.weight";
  testing::TempDir tmp("fp8-nan");
  const std::string d = tmp / "m";
  fs::copy(fixture_dir("deepseek_v3_a"), d, fs::copy_options::recursive);
  {
    format::TensorSet ts = format::TensorSet::open_dir(d);
    const auto& t = ts.get(o);
    ASSERT_EQ(t.dtype, DType::F8_E4M3);
    EXPECT_TRUE(model::weight_matrix(ts, o, t.shape[0], t.shape[1]).fp8_finite);
  }
  rewrite_tensors(d, [&](std::vector<format::TensorToWrite>& ts) {
    for (auto& t : ts)
      if (t.name == o) t.bytes[t.bytes.size() / 2] = std::byte{0xff};
  });
  format::TensorSet ts = format::TensorSet::open_dir(d);
  const auto& t = ts.get(o);
  EXPECT_FALSE(model::weight_matrix(ts, o, t.shape[0], t.shape[1]).fp8_finite);
  ASSERT_EQ(ts.get(q).dtype, DType::F8_E4M3);
  EXPECT_TRUE(model::weight_matrix(ts, q, ts.get(q).shape[0], ts.get(q).shape[1]).fp8_finite);

  // Resident routed experts: the same, per matrix.
  const std::string up = "model.layers.1.mlp.experts.3.up_proj.weight";
  rewrite_tensors(d, [&](std::vector<format::TensorToWrite>& ts) {
    for (auto& t : ts)
      if (t.name == up) t.bytes[1] = std::byte{0x7f};
  });
  format::TensorSet ts2 = format::TensorSet::open_dir(d);
  const store::ExpertBank bank = model::expert_bank_of(d);
  store::ResidentExperts resident(bank, ts2);
  int marked = 0;
  for (int e = 0; e < int(bank.num_experts); ++e) {
    const int32_t id = e;
    resident.begin(1, std::span<const int32_t>(&id, 1));
    device::ExpertView v;
    ASSERT_EQ(resident.next_ready(&v), 0);
    ASSERT_EQ(v.up.type, device::WeightType::FP8_E4M3);
    EXPECT_EQ(v.up.fp8_finite, e != 3) << "expert " << e;
    EXPECT_TRUE(v.gate.fp8_finite && v.down.fp8_finite) << "expert " << e;
    marked += v.up.fp8_finite;
  }
  EXPECT_EQ(marked, int(bank.num_experts) - 1);
}

// Kimi-K2-Thinking's INT4 experts: a tensor that disagrees with the scheme is refused naming it.
TEST(MoeArchRefusals, BadInt4CheckpointsNameTheTensor) {
  struct Case {
    const char* what;
    std::function<void(std::vector<format::TensorToWrite>&)> edit;
    std::vector<std::string> want;
  };
  const std::string E = "model.layers.2.mlp.experts.5.";
  auto edit_tensor = [](const std::string& name, std::function<void(format::TensorToWrite&)> f) {
    return [name, f](std::vector<format::TensorToWrite>& ts) {
      for (auto& t : ts)
        if (t.name == name) f(t);
    };
  };
  const std::vector<Case> cases = {
      {"missing weight_packed",
       [&](auto& ts) { std::erase_if(ts, [&](const auto& t) { return t.name == E + "down_proj.weight_packed"; }); },
       {E + "down_proj.weight_packed", "not found"}},
      {"weight_shape swapped", edit_tensor(E + "up_proj.weight_shape", [](auto& t) {
         const int32_t swapped[2] = {128, 64};
         std::memcpy(t.bytes.data(), swapped, 8);
       }),
       {"expert 5 of layer 2", "up_proj.weight_shape", "[128, 64]", "[64, 128]"}},
      {"weight_shape as I64", edit_tensor(E + "gate_proj.weight_shape", [](auto& t) {
         t.dtype = DType::I64;
         t.shape = {1};
       }),
       {E + "gate_proj.weight_shape", "I64"}},
      {"scales of half the groups", edit_tensor(E + "gate_proj.weight_scale", [](auto& t) {
         t.shape = {64, 2};
         t.bytes.resize(t.bytes.size() / 2);
       }),
       {E + "gate_proj.weight_scale", "[64, 4]"}},
      {"F32 scales", edit_tensor(E + "down_proj.weight_scale", [](auto& t) {
         t.dtype = DType::F32;
         t.bytes.resize(t.bytes.size() * 2);
       }),
       {E + "down_proj.weight_scale", "F32", "BF16"}},
      {"packed as U8", edit_tensor(E + "up_proj.weight_packed", [](auto& t) {
         t.dtype = DType::U8;
         t.shape = {64, 64};
       }),
       {E + "up_proj.weight_packed", "I32"}},
      {"infinite scale", edit_tensor(E + "up_proj.weight_scale", [](auto& t) {
         const uint16_t inf = 0x7f80;
         std::memcpy(t.bytes.data() + 6, &inf, 2);
       }),
       {"expert 5 of layer 2", "up_proj.weight_scale", "group 3", "finite"}},
      {"bf16 expert", [&](auto& ts) {
         std::erase_if(ts, [&](const auto& t) { return t.name.rfind(E + "gate_proj.", 0) == 0; });
         ts.push_back({E + "gate_proj.weight", DType::BF16, {64, 128}, std::vector<std::byte>(64 * 128 * 2)});
       },
       {E + "gate_proj.weight_packed", "not found"}},
  };
  for (const Case& c : cases) {
    testing::TempDir tmp("int4-bad");
    const std::string d = tmp / "m";
    fs::copy(fixture_dir("kimi_k2_int4"), d, fs::copy_options::recursive);
    rewrite_tensors(d, c.edit);
    const std::string msg = load_error(d);
    EXPECT_FALSE(msg.empty()) << c.what << ": accepted";
    for (const auto& w : c.want) EXPECT_NE(msg.find(w), std::string::npos) << c.what << ": '" << msg << "' lacks " << w;
  }
}

// compressed-tensors' quantization_config: Kimi-K2-Thinking's scheme loads, as do ignore lists that
// leave the same modules in BF16; every other variant is refused naming the field.
TEST(MoeArchRefusals, Int4QuantizationConfigsOtherThanKimiK2ThinkingsAreRefused) {
  auto weights = [](json& j) -> json& { return j["quantization_config"]["config_groups"]["group_0"]["weights"]; };
  auto ignore = [](json& j) -> json& { return j["quantization_config"]["ignore"]; };
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    std::vector<std::string> want;  // empty: loads
  };
  const std::vector<Case> cases = {
      {"8 bits", [&](json& j) { weights(j)["num_bits"] = 8; }, {"num_bits", "8"}},
      {"asymmetric", [&](json& j) { weights(j)["symmetric"] = false; }, {"symmetric", "zero points"}},
      {"group 128", [&](json& j) { weights(j)["group_size"] = 128; }, {"group_size", "128"}},
      {"per channel", [&](json& j) { weights(j)["strategy"] = "channel"; }, {"strategy", "channel"}},
      {"float codes", [&](json& j) { weights(j)["type"] = "float"; }, {"type", "float"}},
      {"dynamic", [&](json& j) { weights(j)["dynamic"] = true; }, {"dynamic"}},
      {"act order", [&](json& j) { weights(j)["actorder"] = "group"; }, {"actorder", "group"}},
      {"fp32 scales", [&](json& j) { weights(j)["scale_dtype"] = "torch.float32"; }, {"scale_dtype", "float32"}},
      {"unknown field", [&](json& j) { weights(j)["zero_point"] = 3; }, {"zero_point"}},
      {"int8 format", [](json& j) { j["quantization_config"]["format"] = "int-quantized"; }, {"format", "int-quantized"}},
      {"not compressed", [](json& j) { j["quantization_config"]["quantization_status"] = "frozen"; },
       {"quantization_status", "frozen"}},
      {"activations",
       [](json& j) {
         j["quantization_config"]["config_groups"]["group_0"]["input_activations"] = {{"num_bits", 8}, {"type", "int"}};
       },
       {"input_activations", "activation quantization"}},
      {"targets", [](json& j) { j["quantization_config"]["config_groups"]["group_0"]["targets"] = {"Linear", "Embedding"}; },
       {"targets", "Embedding"}},
      {"two groups",
       [](json& j) {
         json& g = j["quantization_config"]["config_groups"];
         g["group_1"] = g["group_0"];
       },
       {"config_groups", "2 groups"}},
      {"kv cache", [](json& j) { j["quantization_config"]["kv_cache_scheme"] = {{"num_bits", 8}}; }, {"kv_cache_scheme"}},
      {"int4 shared experts", [&](json& j) { ignore(j).erase(2); },
       {"ignore", "model.layers.1.mlp.shared_experts.gate_proj", "would be INT4"}},
      {"int4 attention", [&](json& j) { ignore(j).erase(1); }, {"ignore", "model.layers.0.self_attn.q_a_proj"}},
      {"int4 lm_head", [&](json& j) { ignore(j).erase(0); }, {"ignore", "lm_head"}},
      {"bf16 experts", [&](json& j) { ignore(j).push_back("re:.*experts.*"); },
       {"ignore", "model.layers.1.mlp.experts.0.gate_proj", "ignored"}},
      {"everything bf16", [&](json& j) { ignore(j).push_back("Linear"); }, {"ignore", "experts.0.gate_proj"}},
      {"bad pattern", [&](json& j) { ignore(j).push_back("re:(mlp"); }, {"ignore[4]", "(mlp", "does not compile"}},
      {"odd expert width", [](json& j) { j["moe_intermediate_size"] = 48; }, {"moe_intermediate_size", "32"}},
      {"the same modules named otherwise",
       [&](json& j) {
         ignore(j) = {"lm_head", "re:model\\.layers\\.\\d+\\.self_attn\\.", "re:.*shared_experts", "model.layers.0.mlp.gate_proj",
                      "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"};
       },
       {}},
  };
  for (const Case& c : cases) {
    testing::TempDir tmp("int4-cfg");
    const std::string d = tmp / "m";
    fs::copy(fixture_dir("kimi_k2_int4"), d, fs::copy_options::recursive);
    json j = read_json(d + "/config.json");
    c.edit(j);
    write_json(d + "/config.json", j);
    const std::string msg = load_error(d);
    if (c.want.empty()) {
      EXPECT_EQ(msg, "") << c.what;
      continue;
    }
    EXPECT_FALSE(msg.empty()) << c.what << ": accepted";
    for (const auto& w : c.want) EXPECT_NE(msg.find(w), std::string::npos) << c.what << ": '" << msg << "' lacks " << w;
  }
}

// compressed-tensors matches ignore entries as Python's re.match (anchored at the start only), by
// exact name, or by the class name.
TEST(MoeArchRefusals, IgnoreEntriesMatchAsCompressedTensorsDoes) {
  const format::ModuleMatcher m({"lm_head", "re:.*self_attn.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:model\\.norm"}, "t");
  EXPECT_TRUE(m.matches("lm_head"));
  EXPECT_FALSE(m.matches("model.lm_head"));
  EXPECT_TRUE(m.matches("model.layers.3.self_attn.kv_b_proj"));
  EXPECT_TRUE(m.matches("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(m.matches("model.layers.1.mlp.experts.7.down_proj"));
  EXPECT_TRUE(m.matches("model.normalizer"));  // re.match: a prefix suffices
  EXPECT_FALSE(m.matches("x.model.norm"));      // but it must be at the start
  EXPECT_TRUE(format::ModuleMatcher({"Linear"}, "t").matches("anything"));
}

TEST(MoeArchRefusals, ConfigFieldsThatChangeTheMathAreRefusedByName) {
  struct Case {
    const char* fixture;
    const char* what;
    std::function<void(json&)> edit;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"deepseek_v3_a", "unknown quant", [](json& j) { j["quantization_config"]["quant_method"] = "awq"; },
       {"quant_method", "awq"}},
      {"deepseek_v3_a", "compressed-tensors without groups",
       [](json& j) { j["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", "pack-quantized"}}; },
       {"quantization_config", "config_groups"}},
      {"qwen3_moe_a", "int4 qwen3",
       [](json& j) { j["quantization_config"] = read_json(fixture_dir("kimi_k2_int4") + "/config.json")["quantization_config"]; },
       {"compressed-tensors", "DeepSeek-V3"}},
      {"deepseek_v3_a", "block 64", [](json& j) { j["quantization_config"]["weight_block_size"] = {64, 64}; },
       {"weight_block_size"}},
      {"deepseek_v3_a", "softmax scoring", [](json& j) { j["scoring_func"] = "softmax"; }, {"scoring_func", "softmax"}},
      {"deepseek_v3_a", "greedy topk", [](json& j) { j["topk_method"] = "greedy"; }, {"topk_method", "greedy"}},
      {"deepseek_v3_a", "moe freq", [](json& j) { j["moe_layer_freq"] = 2; }, {"moe_layer_freq"}},
      {"deepseek_v3_a", "groups", [](json& j) { j["n_group"] = 3; }, {"n_group"}},
      {"deepseek_v3_a", "attention bias", [](json& j) { j["attention_bias"] = true; }, {"attention_bias"}},
      {"deepseek_v3_a", "rope type", [](json& j) { j["rope_scaling"]["type"] = "longrope"; }, {"rope_type", "longrope"}},
      {"kimi_k2_b", "kv heads", [](json& j) { j["num_key_value_heads"] = 2; }, {"num_key_value_heads"}},
      {"gpt_oss_a", "dequantized", [](json& j) { j.erase("quantization_config"); }, {"quantization_config", "mxfp4"}},
      {"gpt_oss_a", "other quant", [](json& j) { j["quantization_config"]["quant_method"] = "fp8"; }, {"quant_method", "fp8"}},
      {"gpt_oss_a", "layer type", [](json& j) { j["layer_types"][1] = "chunked_attention"; },
       {"layer_types[1]", "chunked_attention"}},
      {"gpt_oss_a", "partial rope", [](json& j) { j["rope_scaling"]["partial_rotary_factor"] = 0.5; },
       {"partial_rotary_factor"}},
      {"gpt_oss_a", "swiglu limit", [](json& j) { j["swiglu_limit"] = 3.0; }, {"swiglu_limit", "7.0"}},
      {"gpt_oss_a", "not mxfp4 sized", [](json& j) { j["intermediate_size"] = 48; }, {"intermediate_size", "32"}},
      {"qwen3_moe_a", "shared expert", [](json& j) { j["shared_expert_intermediate_size"] = 64; },
       {"shared_expert_intermediate_size"}},
      {"qwen3_moe_a", "top-k", [](json& j) { j["num_experts_per_tok"] = 9; }, {"num_experts_per_tok"}},
      {"qwen3_moe_a", "dense layer", [](json& j) { j["mlp_only_layers"] = {7}; }, {"mlp_only_layers", "7"}},
      {"qwen3_moe_a", "sliding", [](json& j) { j["use_sliding_window"] = true; }, {"use_sliding_window"}},
  };
  for (const Case& c : cases) {
    testing::TempDir tmp("cfg-bad");
    const std::string d = tmp / "m";
    fs::copy(fixture_dir(c.fixture), d, fs::copy_options::recursive);
    json j = read_json(d + "/config.json");
    c.edit(j);
    write_json(d + "/config.json", j);
    const std::string msg = load_error(d);
    EXPECT_FALSE(msg.empty()) << c.what << ": accepted";
    for (const auto& w : c.want) EXPECT_NE(msg.find(w), std::string::npos) << c.what << ": '" << msg << "' lacks " << w;
  }
}

// Configs as transformers 5 saves them: Qwen3-MoE's expert count under num_local_experts (its
// attribute_map's name) is read as num_experts, and the model gives the fixture's logits bit for
// bit (a dense misreading stops at a missing tensor); DeepSeek-V3's n_routed_experts likewise. Two
// names that disagree are refused by both names.
TEST(MoeArchConfig, Transformers5FieldNamesAreRead) {
  for (const auto& [fixture, field] : {std::pair{"qwen3_moe_a", "num_experts"}, std::pair{"deepseek_v3_a", "n_routed_experts"}}) {
    testing::TempDir tmp("cfg-v5");
    const std::string d = tmp / "m";
    fs::copy(fixture_dir(fixture), d, fs::copy_options::recursive);
    json j = read_json(d + "/config.json");
    ASSERT_TRUE(j.contains(field)) << fixture;
    j["num_local_experts"] = j[field];
    j.erase(field);
    write_json(d + "/config.json", j);
    auto renamed = model::load_target(d);
    auto original = model::load_target(fixture_dir(fixture));
    const auto prompt = prompt_of(5, original->info().vocab_size);
    EXPECT_EQ(all_logits(*renamed, prompt), all_logits(*original, prompt)) << fixture;
    j[field] = j["num_local_experts"].get<int64_t>() + 1;
    write_json(d + "/config.json", j);
    const std::string msg = load_error(d);
    EXPECT_NE(msg.find(field), std::string::npos) << msg;
    EXPECT_NE(msg.find("num_local_experts"), std::string::npos) << msg;
  }
}

// Configs exactly as a transformers version saves them (tests/fixtures/transformers_configs/<version>/,
// written by tools/fixtures/save_transformers_configs.py on the GPU machine): every architecture's
// parser reads its fields under the names that version writes (its attribute_map's, its
// rope_parameters). gpt-oss's gets the mxfp4 quantization_config its released checkpoints carry
// (transformers' own config class has none: sluice refuses dequantized gpt-oss by design).
TEST(MoeArchConfig, ConfigsAsTransformersSavesThemParse) {
  const fs::path root = fs::path(SLUICE_SOURCE_DIR) / "tests/fixtures/transformers_configs";
  int parsed = 0;
  for (const auto& version : fs::directory_iterator(root)) {
    const std::string v = version.path().filename().string();
    auto cfg = [&](const std::string& name) { return read_json((version.path() / (name + ".json")).string()); };
    {
      const auto c = model::parse_qwen3_config(cfg("qwen3").dump(), v + " qwen3");
      EXPECT_FALSE(c.moe);
      EXPECT_DOUBLE_EQ(c.rope.theta, 10000.0) << v;
      ++parsed;
    }
    {
      const auto c = model::parse_qwen3_config(cfg("qwen3_moe").dump(), v + " qwen3_moe");
      EXPECT_EQ(c.num_experts, 8) << v;
      EXPECT_EQ(c.experts_per_token, 2) << v;
      ++parsed;
    }
    {
      const auto c = model::parse_deepseek_config(cfg("deepseek_v3").dump(), v + " deepseek_v3");
      EXPECT_EQ(c.num_experts, 8) << v;
      EXPECT_EQ(c.num_shared_experts, 1) << v;
      ++parsed;
    }
    {
      json j = cfg("gpt_oss");
      j["quantization_config"] = read_json(fixture_dir("gpt_oss_a") + "/config.json")["quantization_config"];
      const auto c = model::parse_gpt_oss_config(j.dump(), v + " gpt_oss");
      EXPECT_EQ(c.num_experts, 8) << v;
      ++parsed;
    }
  }
  EXPECT_GE(parsed, 4);
}

}  // namespace
}  // namespace sluice
