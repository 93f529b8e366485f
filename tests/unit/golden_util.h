// Shared check of a model against a reference's expected.safetensors (prompt_ids_i, logits_i at
// every prompt position, greedy_ids_i): max relative logit error <= 1e-4 per position and
// identical greedy tokens. Works for any model with info().vocab_size, new_state() and
// forward(state, ids, PassOptions, logits). Returns the number of prompts checked.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "format/safetensors.h"
#include "model/arch/kimi.h"
#include "runtime/generate.h"

namespace sluice::testing {

// Greedy continuation by one-row passes (for models the generation loop does not drive).
template <typename Model>
std::vector<int32_t> plain_greedy(Model& model, const std::vector<int32_t>& prompt, size_t n) {
  const int64_t V = model.info().vocab_size;
  auto st = model.new_state();
  std::vector<float> logits(static_cast<size_t>(V));
  model.forward(*st, prompt, model::PassOptions{}, logits.data());
  std::vector<int32_t> out;
  while (out.size() < n) {
    out.push_back(runtime::argmax(logits.data(), V));
    if (out.size() < n) model.forward(*st, std::span<const int32_t>(&out.back(), 1), model::PassOptions{}, logits.data());
  }
  return out;
}

template <typename Model>
int check_against_reference(Model& model, const std::string& expected_path, const std::string& label) {
  const int64_t V = model.info().vocab_size;
  auto expected = format::SafetensorsFile::open(expected_path);
  auto find = [&](const std::string& name) -> const format::TensorInfo* {
    for (const auto& t : expected->tensors())
      if (t.name == name) return &t;
    return nullptr;
  };
  int prompts = 0;
  for (int p = 0; find("prompt_ids_" + std::to_string(p)) != nullptr; ++p) {
    ++prompts;
    const auto& ids_t = *find("prompt_ids_" + std::to_string(p));
    const auto* logits_t = find("logits_" + std::to_string(p));
    const auto* greedy_t = find("greedy_ids_" + std::to_string(p));
    EXPECT_NE(logits_t, nullptr);
    EXPECT_NE(greedy_t, nullptr);
    if (!logits_t || !greedy_t) return prompts;
    std::vector<int32_t> ids(ids_t.nbytes / 4), greedy(greedy_t->nbytes / 4);
    std::vector<float> ref(logits_t->nbytes / 4);
    std::memcpy(ids.data(), ids_t.data, ids_t.nbytes);
    std::memcpy(greedy.data(), greedy_t->data, greedy_t->nbytes);
    std::memcpy(ref.data(), logits_t->data, logits_t->nbytes);
    EXPECT_EQ(ref.size(), ids.size() * size_t(V));
    if (ref.size() != ids.size() * size_t(V)) return prompts;

    auto st = model.new_state();
    std::vector<float> got(ref.size());
    model.forward(*st, ids, model::PassOptions{.all_logits = true}, got.data());
    double worst = 0;
    for (size_t t = 0; t < ids.size(); ++t) {
      double scale = 0, err = 0;
      for (int64_t v = 0; v < V; ++v) {
        const size_t i = t * size_t(V) + size_t(v);
        scale = std::max(scale, std::fabs(double(ref[i])));
        err = std::max(err, std::fabs(double(got[i]) - ref[i]));
      }
      worst = std::max(worst, err / std::max(scale, 1e-30));
    }
    EXPECT_LE(worst, 1e-4) << label << " prompt " << p << ": max relative logit error " << worst;
    std::printf("[golden] %s prompt %d: max relative logit error %.3g over %zu positions\n", label.c_str(), p, worst,
                ids.size());

    std::vector<int32_t> generated;
    if constexpr (std::is_same_v<Model, model::KimiModel>) {
      auto st2 = model.new_state();
      runtime::GenerateOptions opt{.max_new = int64_t(greedy.size()), .stop_at_eos = false};
      generated = runtime::generate_greedy(model, *st2, ids, opt).generated;
    } else {
      generated = plain_greedy(model, ids, greedy.size());
    }
    EXPECT_EQ(generated, greedy) << label << " prompt " << p << ": greedy tokens differ from the reference";
  }
  return prompts;
}

}  // namespace sluice::testing
