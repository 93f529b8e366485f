// Single-thread encode throughput (MB/s of UTF-8 input) of every reference tokenizer on the parity
// corpus, with the same corpus's tiktoken / tokenizers speed measured by tools/tokenizer/oracle.py
// on the GPU machine reported alongside (counter ref_MBps; a different CPU, so compare with care).
// Data: $SLUICE_TOKENIZER_DATA or <repo>/build/tokenizer-data (fetched by scripts/fetch-tokenizer-data.sh).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {
namespace fs = std::filesystem;
using namespace sluice::tokenizer;

const fs::path kRepo = fs::path(__FILE__).parent_path().parent_path();

std::string data_dir() {
  const char* env = std::getenv("SLUICE_TOKENIZER_DATA");
  std::string dir = env && *env ? env : (kRepo / "build" / "tokenizer-data").string();
  if (!fs::exists(dir + "/.complete")) {
    std::string cmd = "bash '" + (kRepo / "scripts" / "fetch-tokenizer-data.sh").string() + "' '" + dir + "' 1>&2";
    if (std::system(cmd.c_str()) != 0) return "";
  }
  return dir;
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> docs = [] {
    std::vector<std::string> out;
    std::ifstream in(data_dir() + "/corpus.jsonl");
    std::string line;
    while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line).get<std::string>());
    return out;
  }();
  return docs;
}

std::unique_ptr<Tokenizer> open(const std::string& name) {
  std::string dir = data_dir();
  if (dir.empty()) return nullptr;
  TiktokenOptions opt;
  if (name == "cl100k_base") {
    opt.pattern = TiktokenPattern::cl100k_base;
    return load_tiktoken_file(dir + "/cl100k_base.tiktoken", opt);
  }
  if (name == "o200k_base" || name == "k3_o200k") {
    opt.pattern = name == "o200k_base" ? TiktokenPattern::o200k_base : TiktokenPattern::kimi_k3;
    return load_tiktoken_file(dir + "/o200k_base.tiktoken", opt);
  }
  return load_tokenizer_json_file(dir + "/" + name + "/tokenizer.json");
}

double reference_mbps(const std::string& name) {
  std::ifstream in(kRepo / "tests" / "fixtures" / "tokenizer" / "oracle_summary.json");
  if (!in) return 0;
  nlohmann::json s = nlohmann::json::parse(in, nullptr, false);
  if (s.is_discarded() || !s.contains("timing") || !s["timing"].contains(name)) return 0;
  return s["timing"][name].value("mb_per_s", 0.0);
}

void encode_corpus(benchmark::State& state, const std::string& name) {
  auto tok = open(name);
  if (!tok || corpus().empty()) {
    state.SkipWithError("tokenizer data absent (offline?): run scripts/fetch-tokenizer-data.sh");
    return;
  }
  size_t bytes = 0, tokens = 0;
  std::vector<int32_t> ids;
  for (auto _ : state) {
    for (const std::string& doc : corpus()) {
      ids.clear();
      tok->encode_into(doc, ids);
      bytes += doc.size();
      tokens += ids.size();
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(int64_t(bytes));
  state.counters["MBps"] = benchmark::Counter(double(bytes) / 1e6, benchmark::Counter::kIsRate);
  state.counters["ref_MBps"] = reference_mbps(name);
  state.counters["tokens_per_iter"] = double(tokens) / double(state.iterations());
}

}  // namespace

BENCHMARK_CAPTURE(encode_corpus, cl100k_base, std::string("cl100k_base"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(encode_corpus, o200k_base, std::string("o200k_base"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(encode_corpus, k3_o200k, std::string("k3_o200k"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(encode_corpus, qwen3, std::string("qwen3"))->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(encode_corpus, deepseek_v3, std::string("deepseek_v3"))->Unit(benchmark::kMillisecond)->MinTime(2.0);

BENCHMARK_MAIN();
