// Very long inputs through every reference tokenizer: a 10 MB single line of mixed text and a 2 MB
// run of one letter (one pre-token, so the heap merge path) must round-trip exactly, and the K3
// slicing must cut a 60,000-character run into pieces no longer than 25,000 characters.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tokenizer_test_data.h"

namespace sluice::tokenizer {
namespace {

std::string ten_megabyte_line() {
  auto dir = testing::data_dir();
  std::string line;
  std::ifstream in(*dir + "/corpus.jsonl");
  std::string json;
  while (line.size() < 10'000'000) {
    if (!std::getline(in, json)) {
      in.clear();
      in.seekg(0);
      continue;
    }
    for (char c : nlohmann::json::parse(json).get<std::string>()) line += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return line;
}

class TokenizerLargeInput : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerLargeInput, TenMegabyteLineAndLongRun) {
  SLUICE_REQUIRE_TOKENIZER(tok, GetParam());
  std::string line = ten_megabyte_line();
  std::vector<int32_t> ids = tok->encode(line);
  EXPECT_GT(ids.size(), 1'000'000u);
  if (std::string(GetParam()) != "qwen3") {  // Qwen3 normalises to NFC
    EXPECT_EQ(tok->decode(ids), line);
  }
  std::string run(2'000'000, 'a');
  EXPECT_EQ(tok->decode(tok->encode(run)), run);
}

INSTANTIATE_TEST_SUITE_P(All, TokenizerLargeInput,
                         ::testing::Values("cl100k_base", "o200k_base", "k3_o200k", "qwen3", "deepseek_v3"));

TEST(TokenizerLargeInput, KimiSlicingCutsLongRuns) {
  SLUICE_REQUIRE_TOKENIZER(k3, "k3_o200k");
  SLUICE_REQUIRE_TOKENIZER(o200k, "o200k_base");
  // 60,000 spaces: o200k sees one run; K3 encodes 25,000 + 25,000 + 10,000 separately.
  std::string spaces(60'000, ' ');
  std::vector<int32_t> want;
  for (size_t n : {25'000, 25'000, 10'000}) o200k->encode_into(std::string(n, ' '), want);
  EXPECT_EQ(k3->encode(spaces), want);
}

}  // namespace
}  // namespace sluice::tokenizer
