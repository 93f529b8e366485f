// Same-machine speed check for the GPU machine (which has no build tools): single-thread encode
// MB/s of our tokenizers on the parity corpus, best of N passes, printed as JSON. Built statically
// (apart from glibc) by hand: see tools/tokenizer/README.md. Usage: encode_speed DATA_DIR [PASSES]
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

using namespace sluice::tokenizer;

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string dir = argv[1];
  int passes = argc > 2 ? std::atoi(argv[2]) : 3;
  std::vector<std::string> docs;
  std::ifstream in(dir + "/corpus.jsonl");
  std::string line;
  size_t bytes = 0;
  while (std::getline(in, line)) {
    docs.push_back(nlohmann::json::parse(line).get<std::string>());
    bytes += docs.back().size();
  }
  nlohmann::json out;
  for (std::string name : {"cl100k_base", "o200k_base", "k3_o200k", "qwen3", "deepseek_v3"}) {
    std::unique_ptr<Tokenizer> tok;
    TiktokenOptions opt;
    if (name == "cl100k_base") opt.pattern = TiktokenPattern::cl100k_base;
    if (name == "o200k_base") opt.pattern = TiktokenPattern::o200k_base;
    if (name == "k3_o200k") opt.pattern = TiktokenPattern::kimi_k3;
    if (name == "qwen3" || name == "deepseek_v3") tok = load_tokenizer_json_file(dir + "/" + name + "/tokenizer.json");
    else tok = load_tiktoken_file(dir + (name == "cl100k_base" ? "/cl100k_base.tiktoken" : "/o200k_base.tiktoken"), opt);
    double best = 1e30, best_cpu = 1e30;
    size_t tokens = 0;
    std::vector<int32_t> ids;
    for (int p = 0; p < passes; ++p) {
      tokens = 0;
      auto t0 = std::chrono::steady_clock::now();
      std::clock_t c0 = std::clock();
      for (const auto& d : docs) {
        ids.clear();
        tok->encode_into(d, ids);
        tokens += ids.size();
      }
      best_cpu = std::min(best_cpu, double(std::clock() - c0) / CLOCKS_PER_SEC);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    out[name] = {{"seconds", best}, {"mb_per_s", double(bytes) / best / 1e6}, {"cpu_mb_per_s", double(bytes) / best_cpu / 1e6},
                 {"tokens", tokens}};
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
