// Golden parity against outside references: transformers' KimiLinearForCausalLM (kimi_linear_*)
// and the plain PyTorch K3 reference in tools/reference (k3_tiny_*), computed on the GPU machine
// by tools/fixtures/*.py and committed with each checkpoint as expected.safetensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "format/safetensors.h"
#include "model/kimi.h"
#include "runtime/generate.h"

namespace sluice {
namespace {

std::string fixture_dir(const std::string& name) { return std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/" + name; }

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, LogitsAndGreedyTokensMatchTheReference) {
  const std::string dir = fixture_dir(GetParam());
  ASSERT_TRUE(std::filesystem::exists(dir + "/expected.safetensors")) << "missing fixture " << dir;
  auto model = model::KimiModel::load(dir);
  const int64_t V = model->config().vocab_size;
  // expected.safetensors sits beside the checkpoint; open it as its own file.
  auto expected_file = format::SafetensorsFile::open(dir + "/expected.safetensors");
  auto find = [&](const std::string& name) -> const format::TensorInfo& {
    for (const auto& t : expected_file->tensors())
      if (t.name == name) return t;
    throw std::runtime_error("expected.safetensors has no " + name);
  };
  int prompts = 0;
  for (int p = 0; p < 8; ++p) {
    bool present = false;
    for (const auto& t : expected_file->tensors()) present |= t.name == "prompt_ids_" + std::to_string(p);
    if (!present) break;
    ++prompts;
    const auto& ids_t = find("prompt_ids_" + std::to_string(p));
    const auto& logits_t = find("logits_" + std::to_string(p));
    const auto& greedy_t = find("greedy_ids_" + std::to_string(p));
    std::vector<int32_t> ids(ids_t.nbytes / 4), greedy(greedy_t.nbytes / 4);
    std::vector<float> ref(logits_t.nbytes / 4);
    std::memcpy(ids.data(), ids_t.data, ids_t.nbytes);
    std::memcpy(greedy.data(), greedy_t.data, greedy_t.nbytes);
    std::memcpy(ref.data(), logits_t.data, logits_t.nbytes);
    ASSERT_EQ(ref.size(), ids.size() * size_t(V));

    auto st = model->new_state();
    std::vector<float> got(ref.size());
    model->forward(st, ids, model::PassOptions{.all_logits = true}, got.data());
    double worst = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      double scale = 0, err = 0;
      for (int64_t v = 0; v < V; ++v) {
        scale = std::max(scale, std::fabs(double(ref[t * size_t(V) + size_t(v)])));
        err = std::max(err, std::fabs(double(got[t * size_t(V) + size_t(v)]) - ref[t * size_t(V) + size_t(v)]));
      }
      worst = std::max(worst, err / std::max(scale, 1e-30));
    }
    EXPECT_LE(worst, 1e-4) << GetParam() << " prompt " << p << ": max relative logit error " << worst;
    RecordProperty("max_rel_err_prompt_" + std::to_string(p), std::to_string(worst));
    std::printf("[golden] %s prompt %d: max relative logit error %.3g over %zu positions\n", GetParam().c_str(), p,
                worst, ids.size());

    auto st2 = model->new_state();
    runtime::GenerateOptions opt{.max_new = int64_t(greedy.size()), .stop_at_eos = false};
    auto r = runtime::generate_greedy(*model, st2, ids, opt);
    EXPECT_EQ(r.generated, greedy) << GetParam() << " prompt " << p << ": greedy tokens differ";
  }
  EXPECT_GE(prompts, 1) << "fixture has no prompts";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Values("kimi_linear_a", "kimi_linear_b", "k3_tiny_a", "k3_tiny_b"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace sluice
