// Test tokenizers for the DeepSeek-V3, Kimi K2 and gpt-oss chat formats, built from the npm-fetched
// data (scripts/fetch-tokenizer-data.sh): DeepSeek-V3's real tokenizer.json; gpt-oss's o200k_harmony
// (the o200k_base ranks with harmony's special tokens at their real ids, as tiktoken defines the
// encoding); a Kimi K2 layout (the first 163,584 o200k ranks, standing in for Kimi's tiktoken.model
// of the same size, with K2's special tokens at their real ids). nullptr when the data is absent.
#pragma once
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "tokenizer_test_data.h"

namespace sluice::tokenizer::testing {

inline const Tokenizer* gpt_oss_tokenizer() {
  static std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    auto dir = data_dir();
    if (!dir) return nullptr;
    TiktokenOptions opt;
    opt.pattern = TiktokenPattern::o200k_base;
    const std::pair<int32_t, const char*> named[] = {{199998, "<|startoftext|>"}, {199999, "<|endoftext|>"},
                                                     {200002, "<|return|>"},      {200003, "<|constrain|>"},
                                                     {200005, "<|channel|>"},     {200006, "<|start|>"},
                                                     {200007, "<|end|>"},         {200008, "<|message|>"},
                                                     {200012, "<|call|>"},        {200018, "<|endofprompt|>"}};
    for (auto [id, s] : named) opt.specials.push_back(SpecialToken{id, s, true});
    for (int32_t id : {200000, 200001, 200004, 200009, 200010, 200011})
      opt.specials.push_back(SpecialToken{id, "<|reserved_" + std::to_string(id) + "|>", true});
    for (int32_t id = 200013; id < 201088; ++id)
      if (id != 200018) opt.specials.push_back(SpecialToken{id, "<|reserved_" + std::to_string(id) + "|>", true});
    return load_tiktoken_file(*dir + "/o200k_base.tiktoken", opt);
  }();
  return tok.get();
}

inline const Tokenizer* kimi_k2_tokenizer() {
  static std::unique_ptr<Tokenizer> tok = []() -> std::unique_ptr<Tokenizer> {
    auto dir = data_dir();
    if (!dir) return nullptr;
    std::ifstream in(*dir + "/o200k_base.tiktoken");
    std::string line, ranks;
    for (int n = 0; n < 163584 && std::getline(in, line); ++n) ranks += line + "\n";
    TiktokenOptions opt;
    opt.pattern = TiktokenPattern::kimi_k3;
    const std::pair<int32_t, const char*> k2[] = {
        {163584, "[BOS]"},           {163585, "[EOS]"},
        {163586, "<|im_end|>"},      {163587, "<|im_user|>"},
        {163588, "<|im_assistant|>"}, {163590, "<|start_header_id|>"},
        {163591, "<|end_header_id|>"}, {163593, "[EOT]"},
        {163594, "<|im_system|>"},   {163595, "<|tool_calls_section_begin|>"},
        {163596, "<|tool_calls_section_end|>"}, {163597, "<|tool_call_begin|>"},
        {163598, "<|tool_call_argument_begin|>"}, {163599, "<|tool_call_end|>"},
        {163601, "<|im_middle|>"},   {163602, "<|media_begin|>"},
        {163603, "<|media_content|>"}, {163604, "<|media_end|>"},
        {163605, "<|media_pad|>"},   {163606, "<think>"},
        {163607, "</think>"},        {163838, "[UNK]"},
        {163839, "[PAD]"}};
    for (auto [id, s] : k2) opt.specials.push_back(SpecialToken{id, s, true});
    return load_tiktoken_bytes(ranks, "o200k_base.tiktoken (first 163584 ranks)", opt);
  }();
  return tok.get();
}

}  // namespace sluice::tokenizer::testing
