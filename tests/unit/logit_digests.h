// Digests (xxh3 of the bytes) of the logits of every golden fixture and default model under a
// fixed set of passes: whole-prompt, token-by-token decoding, a recorded verify pass committed at
// a prefix, DSpark captures and proposals. The logit gate compares them with the recorded ones on
// every CPU ISA; the GPU tests compare cuda-ref's with the recorded scalar ones.
#pragma once
#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "device/cpu/kernels.h"
#include "device/device.h"
#include "model/arch/dspark.h"
#include "model/registry.h"
#include "runtime/sampling.h"

namespace sluice::testing {

inline std::string src(const std::string& rel) { return std::string(SLUICE_SOURCE_DIR) + "/" + rel; }

struct Digests {
  std::string isa;
  std::map<std::string, std::string> got;
  void emit(const std::string& name, const std::vector<float>& v) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH3_64bits(v.data(), v.size() * 4));
    got[name] = std::string(hex) + " " + std::to_string(v.size());
  }
};

inline std::vector<std::vector<int32_t>> prompts_of(const std::string& path) {
  std::vector<std::vector<int32_t>> ps;
  auto f = format::SafetensorsFile::open(path);
  for (int p = 0;; ++p) {
    const format::TensorInfo* t = nullptr;
    for (const auto& x : f->tensors())
      if (x.name == "prompt_ids_" + std::to_string(p)) t = &x;
    if (!t) break;
    std::vector<int32_t> ids(t->nbytes / 4);
    std::memcpy(ids.data(), t->data, t->nbytes);
    ps.push_back(ids);
  }
  return ps;
}

// Per prompt: (a) one all-logits pass, (b) greedy decoding by 6 one-row passes, (c) a recorded
// 4-row pass committed at 2, then one-row passes.
inline void run_model(Digests& d, const std::string& label, model::Target& m, const std::vector<std::vector<int32_t>>& prompts) {
  const int64_t V = m.info().vocab_size;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& ids = prompts[p];
    const std::string tag = label + "/p" + std::to_string(p);
    {
      auto st = m.new_state();
      std::vector<float> lg(ids.size() * V);
      m.forward(*st, ids, model::PassOptions{.all_logits = true}, lg.data());
      d.emit(tag + "/all", lg);
    }
    std::vector<float> dec;
    std::vector<int32_t> greedy;
    {
      auto st = m.new_state();
      std::vector<float> lg(V);
      m.forward(*st, ids, model::PassOptions{}, lg.data());
      dec.insert(dec.end(), lg.begin(), lg.end());
      for (int i = 0; i < 6; ++i) {
        int32_t t = runtime::argmax(lg.data(), V);
        greedy.push_back(t);
        m.forward(*st, std::span<const int32_t>(&t, 1), model::PassOptions{}, lg.data());
        dec.insert(dec.end(), lg.begin(), lg.end());
      }
      d.emit(tag + "/decode", dec);
    }
    {
      auto st = m.new_state();
      std::vector<float> lg(4 * V);
      m.forward(*st, ids, model::PassOptions{}, lg.data());
      std::vector<int32_t> rows = {greedy[0], greedy[1], int32_t((greedy[2] + 1) % V), greedy[3]};
      m.forward(*st, rows, model::PassOptions{.all_logits = true, .record = true}, lg.data());
      std::vector<float> acc(lg.begin(), lg.end());
      m.commit_prefix(*st, 2);
      int32_t t = greedy[2];
      std::vector<float> one(V);
      for (int i = 0; i < 3; ++i) {
        m.forward(*st, std::span<const int32_t>(&t, 1), model::PassOptions{}, one.data());
        acc.insert(acc.end(), one.begin(), one.end());
        t = runtime::argmax(one.data(), V);
      }
      d.emit(tag + "/verify", acc);
    }
  }
}

// Target rows captured in one pass, appended to a DSpark drafter, one proposal's logits.
inline void run_dspark(Digests& d, const std::string& label, const std::string& tdir, const std::string& ddir,
                std::vector<int32_t> ids, device::Device* dev) {
  auto t = model::load_target(model::LoadOptions{.dir = tdir, .device = dev});
  auto ds = model::DSparkModel::load(ddir, *t);
  const auto& c = ds->config();
  const int64_t V = t->info().vocab_size, H = t->info().hidden_size;
  std::vector<float> rows(ids.size() * c.target_layer_ids.size() * H), lg(V);
  model::HiddenCapture cap{c.target_layer_ids, rows.data()};
  auto st = t->new_state();
  t->forward(*st, std::span<const int32_t>(ids.data(), ids.size() - 1), {.capture = &cap}, lg.data());
  rows.resize((ids.size() - 1) * c.target_layer_ids.size() * H);
  d.emit(label + "/rows", rows);
  ds->append_context(rows.data(), int64_t(ids.size() - 1));
  std::vector<float> base;
  auto prop = ds->propose(ids.back(), 7, 0.0, &base);
  d.emit(label + "/base_logits", base);
  std::vector<float> conf(prop.confidence.begin(), prop.confidence.end());
  for (int32_t x : prop.tokens) conf.push_back(float(x));
  d.emit(label + "/proposal", conf);
}

// Whether the trained default models are in this checkout (the GPU machine gets the tree without
// models/, which is larger than what a device call carries).
inline bool have_default_models() { return std::filesystem::exists(src("models/default/target/config.json")); }

// Every digest, on `dev` (null: the process-wide CPU device at `isa`); the default models' only
// when `default_models`.
inline Digests compute(const std::string& isa, device::Device* dev = nullptr, bool default_models = true) {
  device::set_active_isa(isa);
  Digests d{isa, {}};
  auto load = [&](const std::string& dir) { return model::load_target(model::LoadOptions{.dir = dir, .device = dev}); };
  const std::vector<std::vector<int32_t>> default_prompts = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {100, 7, 42}};
  auto fixture = [&](const std::string& label, const std::string& dir, const std::string& expected) {
    auto m = load(src(dir));
    run_model(d, label, *m, prompts_of(src(expected)));
  };
  for (std::string f : {"kimi_linear_a", "kimi_linear_b", "k3_tiny_a", "k3_tiny_b"})
    fixture(f, "tests/fixtures/" + f, "tests/fixtures/" + f + "/expected.safetensors");
  if (default_models) {
    fixture("default_target", "models/default/target", "tests/fixtures/default_target/expected.safetensors");
    auto m = load(src("models/default/draft"));
    run_model(d, "default_draft", *m, default_prompts);
  }
  for (std::string f : {"qwen3_a", "qwen3_b"})
    fixture(f, "tests/fixtures/" + f, "tests/fixtures/" + f + "/expected.safetensors");
  if (default_models)
    fixture("default_draft_qwen3", "models/default/draft-qwen3", "models/default/draft-qwen3/expected.safetensors");
  for (std::string f : {"qwen3_moe_a", "qwen3_moe_b", "gpt_oss_a", "gpt_oss_b", "deepseek_v3_a", "kimi_k2_b", "kimi_k2_int4"})
    fixture(f, "tests/fixtures/" + f, "tests/fixtures/" + f + "/expected.safetensors");
  run_dspark(d, "dspark_tiny", src("tests/fixtures/k3_tiny_a"), src("tests/fixtures/dspark_tiny"),
             {5, 17, 99, 3, 250, 7, 64, 12}, dev);
  run_dspark(d, "dspark_tiny_b", src("tests/fixtures/k3_tiny_b"), src("tests/fixtures/dspark_tiny_b"),
             {9, 1, 33, 200, 4, 18}, dev);
  if (default_models)
    run_dspark(d, "dspark_default", src("models/default/target"), src("models/default/dspark"),
               {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, dev);
  return d;
}

inline std::map<std::string, std::map<std::string, std::string>> recorded_digests() {
  std::ifstream in(src("tests/fixtures/logit_gate/digests.txt"));
  std::map<std::string, std::map<std::string, std::string>> by_isa;
  std::string isa, name, hash, n;
  while (in >> isa >> name >> hash >> n) by_isa[isa][name] = hash + " " + n;
  return by_isa;
}

}  // namespace sluice::testing
