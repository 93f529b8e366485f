// Test-side access to tokenizer data: the committed fixtures under tests/fixtures/tokenizer and the
// large npm-fetched files (scripts/fetch-tokenizer-data.sh), loaded once per test process.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "tokenizer/token_table.h"
#include "tokenizer/tokenizer.h"

namespace sluice::tokenizer::testing {

inline std::string fixture_path(const std::string& name) {
  return std::string(SLUICE_SOURCE_DIR) + "/tests/fixtures/tokenizer/" + name;
}

// Directory with the fetched data, fetching it on first use; nullopt when unavailable (offline).
// SLUICE_TOKENIZER_DATA overrides the location; SLUICE_NO_FETCH=1 forbids the download.
inline std::optional<std::string> data_dir() {
  static const std::optional<std::string> dir = []() -> std::optional<std::string> {
    const char* env = std::getenv("SLUICE_TOKENIZER_DATA");
    std::string d = env && *env ? env : std::string(SLUICE_SOURCE_DIR) + "/build/tokenizer-data";
    if (!std::getenv("SLUICE_NO_FETCH")) {
      std::string cmd = "bash '" + std::string(SLUICE_SOURCE_DIR) + "/scripts/fetch-tokenizer-data.sh' '" + d + "' 1>&2";
      if (std::system(cmd.c_str()) != 0) return std::nullopt;
    }
    if (!std::filesystem::exists(d + "/.complete")) return std::nullopt;
    return d;
  }();
  return dir;
}

// Loads (once) one of the reference tokenizers: cl100k_base, o200k_base, k3_o200k (the K3 pattern
// over o200k ranks), qwen3, deepseek_v3. nullptr when the data is absent.
inline const Tokenizer* reference_tokenizer(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto dir = data_dir();
  if (!dir) return nullptr;
  std::unique_ptr<Tokenizer> tok;
  TiktokenOptions opt;
  if (name == "cl100k_base") {
    opt.pattern = TiktokenPattern::cl100k_base;
    tok = load_tiktoken_file(*dir + "/cl100k_base.tiktoken", opt);
  } else if (name == "o200k_base" || name == "k3_o200k") {
    opt.pattern = name == "o200k_base" ? TiktokenPattern::o200k_base : TiktokenPattern::kimi_k3;
    tok = load_tiktoken_file(*dir + "/o200k_base.tiktoken", opt);
  } else {
    tok = load_tokenizer_json_file(*dir + "/" + name + "/tokenizer.json");
  }
  return (cache[name] = std::move(tok)).get();
}

// FNV-1a over the ids' 32-bit little-endian bytes (tools/tokenizer/pack_fixtures.py computes the same).
inline uint64_t fnv1a_ids(const std::vector<int32_t>& ids) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (int32_t id : ids)
    for (int k = 0; k < 4; ++k) h = (h ^ ((uint32_t(id) >> (8 * k)) & 0xFF)) * 0x100000001B3ULL;
  return h;
}

}  // namespace sluice::tokenizer::testing

#define SLUICE_REQUIRE_TOKENIZER(var, name)                                                         \
  const ::sluice::tokenizer::Tokenizer* var = ::sluice::tokenizer::testing::reference_tokenizer(name); \
  if (!var)                                                                                         \
  GTEST_SKIP() << "tokenizer data absent (offline?): run scripts/fetch-tokenizer-data.sh to test " << name
