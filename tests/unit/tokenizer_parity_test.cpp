// Parity with the outside references (tiktoken 0.14, Hugging Face tokenizers 0.23.2; see
// tools/tokenizer/oracle.py): the >= 2 MB corpus, gpt-tokenizer's TestPlans and edge cases must give
// identical ids, and decode(encode(x)) == x.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer_test_data.h"

namespace sluice::tokenizer {
namespace {
using testing::fixture_path;

std::vector<std::string> load_corpus() {
  auto dir = testing::data_dir();
  std::vector<std::string> docs;
  if (!dir) return docs;
  std::ifstream in(*dir + "/corpus.jsonl");
  std::string line;
  while (std::getline(in, line)) docs.push_back(nlohmann::json::parse(line).get<std::string>());
  return docs;
}

struct Expected {
  size_t count;
  uint64_t hash;
};

std::vector<Expected> load_expected(const std::string& encoding) {
  std::ifstream in(fixture_path("corpus_expected.tsv"));
  std::vector<Expected> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, hash;
    size_t doc, count;
    fields >> name >> doc >> count >> hash;
    if (name != encoding) continue;
    EXPECT_EQ(doc, out.size());
    out.push_back(Expected{count, std::stoull(hash, nullptr, 16)});
  }
  return out;
}

void check_corpus(const std::string& encoding, bool check_roundtrip) {
  SLUICE_REQUIRE_TOKENIZER(tok, encoding);
  std::vector<std::string> docs = load_corpus();
  std::vector<Expected> expected = load_expected(encoding);
  ASSERT_GT(docs.size(), 700u);
  ASSERT_EQ(docs.size(), expected.size()) << "corpus and corpus_expected.tsv disagree";
  size_t bytes = 0, failures = 0, roundtrip_failures = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    bytes += docs[i].size();
    std::vector<int32_t> ids = tok->encode(docs[i]);
    if (ids.size() != expected[i].count || testing::fnv1a_ids(ids) != expected[i].hash) {
      if (++failures <= 5)
        ADD_FAILURE() << encoding << " document " << i << ": " << ids.size() << " ids, expected "
                      << expected[i].count << " (hash differs); text starts: " << docs[i].substr(0, 120);
    }
    if (check_roundtrip && tok->decode(ids) != docs[i]) ++roundtrip_failures;
  }
  EXPECT_GE(bytes, 2000000u);
  EXPECT_EQ(failures, 0u) << encoding << ": documents whose ids differ from the reference";
  EXPECT_EQ(roundtrip_failures, 0u) << encoding << ": decode(encode(x)) != x";
  // A few documents are stored in full, so a mismatch there shows the first differing id.
  std::ifstream in(fixture_path("corpus_full_ids.json"));
  nlohmann::json full = nlohmann::json::parse(in);
  for (size_t i = 0; i < full[encoding].size(); ++i) {
    std::vector<int32_t> want = full[encoding][i].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(docs[i]), want) << encoding << " document " << i;
  }
}

TEST(TokenizerParity, Cl100kCorpus) { check_corpus("cl100k_base", true); }
TEST(TokenizerParity, O200kCorpus) { check_corpus("o200k_base", true); }
TEST(TokenizerParity, KimiK3PatternCorpus) { check_corpus("k3_o200k", true); }
TEST(TokenizerParity, Qwen3Corpus) { check_corpus("qwen3", false); }
TEST(TokenizerParity, DeepSeekV3Corpus) { check_corpus("deepseek_v3", true); }

TEST(TokenizerParity, TestPlans) {
  std::ifstream in(fixture_path("testplans.json"));
  nlohmann::json plans = nlohmann::json::parse(in);
  ASSERT_GE(plans.size(), 100u);
  for (const auto& p : plans) {
    std::string enc = p["encoding"].get<std::string>();
    SLUICE_REQUIRE_TOKENIZER(tok, enc);
    std::string sample = p["sample"].get<std::string>();
    EXPECT_EQ(tok->encode(sample), p["ids"].get<std::vector<int32_t>>()) << enc << ": " << sample;
    EXPECT_EQ(tok->decode(tok->encode(sample)), sample);
  }
}

TEST(TokenizerParity, EdgeCases) {
  std::ifstream in(fixture_path("edge_cases.json"));
  nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 40u);
  for (const auto& c : cases) {
    std::string text = c["text"].get<std::string>();
    for (const auto& [enc, ids] : c["ids"].items()) {
      SLUICE_REQUIRE_TOKENIZER(tok, enc);
      EXPECT_EQ(tok->encode(text), ids.get<std::vector<int32_t>>()) << enc << ": " << nlohmann::json(text).dump();
    }
  }
}

// tokenizer/pieces.h's forced piece starts hold for the reference pre-tokenizers too.
class ForcedPieceStarts : public ::testing::TestWithParam<std::string> {};

TEST_P(ForcedPieceStarts, EncodingSplitsExactly) {
  SLUICE_REQUIRE_TOKENIZER(tok, GetParam());
  EXPECT_GE(testing::expect_forced_starts_split(*tok, GetParam()), 50);
  // And on real text: the first documents of the parity corpus (prose, code, many scripts),
  // each cut to 2,000 bytes to keep the quadratic check quick.
  std::vector<std::string> docs = load_corpus();
  if (docs.size() > 60) docs.resize(60);
  for (auto& d : docs) d.resize(std::min<size_t>(d.size(), 3000));
  EXPECT_GE(testing::expect_forced_starts_split(*tok, GetParam(), docs), 1000);
}

INSTANTIATE_TEST_SUITE_P(Reference, ForcedPieceStarts,
                         ::testing::Values("cl100k_base", "o200k_base", "k3_o200k", "qwen3", "deepseek_v3"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace sluice::tokenizer
