// What the request fuzz targets (openai_request_fuzz, anthropic_request_fuzz) render chats with:
// a tokenizer whose ranks are the 256 single bytes and whose specials are every chat format's, and
// the list of chat formats.
#pragma once
#include <memory>
#include <string>

#include "fuzz_b64.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace fuzz {

inline constexpr sluice::tokenizer::ChatFormat kChatFormats[] = {
    sluice::tokenizer::ChatFormat::kimi_k3,      sluice::tokenizer::ChatFormat::qwen3,
    sluice::tokenizer::ChatFormat::deepseek_v3,  sluice::tokenizer::ChatFormat::deepseek_v3_0324,
    sluice::tokenizer::ChatFormat::kimi_k2,      sluice::tokenizer::ChatFormat::kimi_k2_thinking,
    sluice::tokenizer::ChatFormat::gpt_oss};

inline std::unique_ptr<sluice::tokenizer::Tokenizer> chat_tokenizer() {
  std::string ranks;
  for (int b = 0; b < 256; ++b) ranks += b64(std::string(1, char(b))) + " " + std::to_string(b) + "\n";
  sluice::tokenizer::TiktokenOptions opt;
  int32_t id = 256;
  for (const char* s : {"<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>", "<|im_start|>", "<|im_end|>", "<think>",
                        "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
                        "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
                        "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                        "<｜tool▁sep｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
                        "<｜tool▁output▁end｜>", "<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>",
                        "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                        "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|start|>", "<|channel|>",
                        "<|constrain|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>"})
    opt.specials.push_back({id++, s, true});
  return sluice::tokenizer::load_tiktoken_bytes(ranks, "fuzz-chat.tiktoken", opt);
}

}  // namespace fuzz
