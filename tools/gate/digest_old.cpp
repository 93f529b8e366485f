// The refactor gate's recorder, built against commit 85b4594 (the engine before the device and
// target seams; see tools/gate/record_digests.sh): xxh3 digests of the logits of every golden
// fixture and default model, per CPU ISA, in the cases tests/unit/logit_gate_test.cpp repeats.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <xxhash.h>
#include "format/safetensors.h"
#include "device/cpu/kernels.h"
#include "model/kimi.h"
#include "model/qwen3.h"
#include "model/dspark.h"
#include "runtime/sampling.h"

using namespace sluice;
static FILE* out;
static std::string isa_name;
static void emit(const std::string& name, const std::vector<float>& v) {
  std::fprintf(out, "%s %s %016llx %zu\n", isa_name.c_str(), name.c_str(),
               (unsigned long long)XXH3_64bits(v.data(), v.size() * 4), v.size());
}
static std::vector<std::vector<int32_t>> prompts_of(const std::string& path) {
  std::vector<std::vector<int32_t>> ps;
  auto f = format::SafetensorsFile::open(path);
  for (int p = 0;; ++p) {
    const format::TensorInfo* t = nullptr;
    for (const auto& x : f->tensors()) if (x.name == "prompt_ids_" + std::to_string(p)) t = &x;
    if (!t) break;
    std::vector<int32_t> ids(t->nbytes / 4);
    std::memcpy(ids.data(), t->data, t->nbytes);
    ps.push_back(ids);
  }
  return ps;
}
// Cases per prompt: (a) one all-logits pass, (b) greedy decode 6 one-row steps, (c) a recorded
// 4-row pass committed at 2 then one-row steps.
template <typename M, typename Commit>
static void run_model(const std::string& label, M& m, int64_t V, const std::vector<std::vector<int32_t>>& prompts,
                      Commit commit) {
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto& ids = prompts[p];
    std::string tag = label + "/p" + std::to_string(p);
    {
      auto st = m.new_state();
      std::vector<float> lg(ids.size() * V);
      m.forward(st, ids, model::PassOptions{.all_logits = true}, lg.data());
      emit(tag + "/all", lg);
    }
    std::vector<float> dec;
    std::vector<int32_t> greedy;
    {
      auto st = m.new_state();
      std::vector<float> lg(V);
      m.forward(st, ids, model::PassOptions{}, lg.data());
      dec.insert(dec.end(), lg.begin(), lg.end());
      for (int i = 0; i < 6; ++i) {
        int32_t t = runtime::argmax(lg.data(), V);
        greedy.push_back(t);
        m.forward(st, std::span<const int32_t>(&t, 1), model::PassOptions{}, lg.data());
        dec.insert(dec.end(), lg.begin(), lg.end());
      }
      emit(tag + "/decode", dec);
    }
    {
      auto st = m.new_state();
      std::vector<float> lg(4 * V);
      m.forward(st, ids, model::PassOptions{}, lg.data());
      std::vector<int32_t> rows = {greedy[0], greedy[1], int32_t((greedy[2] + 1) % V), greedy[3]};
      m.forward(st, rows, model::PassOptions{.all_logits = true, .record = true}, lg.data());
      std::vector<float> acc(lg.begin(), lg.end());
      commit(m, st, 2);
      int32_t t = greedy[2];
      std::vector<float> one(V);
      for (int i = 0; i < 3; ++i) {
        m.forward(st, std::span<const int32_t>(&t, 1), model::PassOptions{}, one.data());
        acc.insert(acc.end(), one.begin(), one.end());
        t = runtime::argmax(one.data(), V);
      }
      emit(tag + "/verify", acc);
    }
  }
}
int main(int argc, char** argv) {
  std::string src = argv[1];
  out = std::fopen(argv[2], "w");
  std::vector<std::string> isas;
  for (auto* i : device::available_isas()) isas.push_back(i->name);
  const std::vector<std::vector<int32_t>> default_prompts = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {100, 7, 42}};
  for (const auto& isa : isas) {
    device::set_active_isa(isa);
    isa_name = isa;
    auto kimi = [&](const std::string& label, const std::string& dir, std::vector<std::vector<int32_t>> ps) {
      auto m = model::KimiModel::load(dir);
      run_model(label, *m, m->config().vocab_size, ps,
                [](model::KimiModel& mm, model::SequenceState& st, int64_t n) { mm.commit_prefix(st, n); });
    };
    for (std::string f : {"kimi_linear_a", "kimi_linear_b", "k3_tiny_a", "k3_tiny_b"})
      kimi(f, src + "/tests/fixtures/" + f, prompts_of(src + "/tests/fixtures/" + f + "/expected.safetensors"));
    kimi("default_target", src + "/models/default/target", prompts_of(src + "/tests/fixtures/default_target/expected.safetensors"));
    kimi("default_draft", src + "/models/default/draft", default_prompts);
    auto qwen = [&](const std::string& label, const std::string& dir, std::vector<std::vector<int32_t>> ps) {
      auto m = model::Qwen3Model::load(dir);
      run_model(label, *m, m->config().vocab_size, ps,
                [](model::Qwen3Model&, model::Qwen3State& st, int64_t n) { st.truncate(st.length() - 4 + n); });
    };
    for (std::string f : {"qwen3_a", "qwen3_b"})
      qwen(f, src + "/tests/fixtures/" + f, prompts_of(src + "/tests/fixtures/" + f + "/expected.safetensors"));
    qwen("default_draft_qwen3", src + "/models/default/draft-qwen3", prompts_of(src + "/models/default/draft-qwen3/expected.safetensors"));
    // DSpark: target rows captured in one pass, appended, one proposal's base logits.
    auto dspark = [&](const std::string& label, const std::string& tdir, const std::string& ddir, std::vector<int32_t> ids) {
      auto t = model::KimiModel::load(tdir);
      auto d = model::DSparkModel::load(ddir, *t);
      const auto& c = d->config();
      const int64_t V = t->config().vocab_size, H = t->config().hidden_size;
      std::vector<float> rows(ids.size() * c.target_layer_ids.size() * H), lg(V);
      model::HiddenCapture cap{c.target_layer_ids, rows.data()};
      auto st = t->new_state();
      t->forward(st, std::span<const int32_t>(ids.data(), ids.size() - 1), {.capture = &cap}, lg.data());
      rows.resize((ids.size() - 1) * c.target_layer_ids.size() * H);
      emit(label + "/rows", rows);
      d->append_context(rows.data(), int64_t(ids.size() - 1));
      std::vector<float> base;
      auto prop = d->propose(ids.back(), 7, 0.0, &base);
      emit(label + "/base_logits", base);
      std::vector<float> conf(prop.confidence.begin(), prop.confidence.end());
      for (int32_t x : prop.tokens) conf.push_back(float(x));
      emit(label + "/proposal", conf);
    };
    dspark("dspark_tiny", src + "/tests/fixtures/k3_tiny_a", src + "/tests/fixtures/dspark_tiny", {5, 17, 99, 3, 250, 7, 64, 12});
    dspark("dspark_tiny_b", src + "/tests/fixtures/k3_tiny_b", src + "/tests/fixtures/dspark_tiny_b", {9, 1, 33, 200, 4, 18});
    dspark("dspark_default", src + "/models/default/target", src + "/models/default/dspark", {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  }
  std::fclose(out);
}
