// Golden parity against outside references: transformers' KimiLinearForCausalLM (kimi_linear_*)
// and the plain PyTorch K3 reference in tools/reference (k3_tiny_*), computed on the GPU machine
// by tools/fixtures/*.py and committed with each checkpoint as expected.safetensors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "format/safetensors.h"
#include "model/arch/kimi.h"
#include "golden_util.h"
#include "runtime/generate.h"

namespace sluice {
namespace {

std::string fixture_dir(const std::string& name) { return std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/" + name; }

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, LogitsAndGreedyTokensMatchTheReference) {
  const std::string dir = fixture_dir(GetParam());
  ASSERT_TRUE(std::filesystem::exists(dir + "/expected.safetensors")) << "missing fixture " << dir;
  auto model = model::KimiModel::load(dir);
  int prompts = testing::check_against_reference(*model, dir + "/expected.safetensors", GetParam());
  EXPECT_GE(prompts, 1) << "fixture has no prompts";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Golden,
                         ::testing::Values("kimi_linear_a", "kimi_linear_b", "k3_tiny_a", "k3_tiny_b"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace sluice
