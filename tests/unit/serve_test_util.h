// Helpers of the server's unit tests: a byte-level tokenizer with every chat format's markers, and
// a pair of reply writers fed the same pieces.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "serve/reply_writer.h"
#include "tokenizer/tokenizer.h"

namespace sluice::serve {

// Byte-level ranks with every chat format's markers after them: the formats' structure without a
// real vocabulary (offline).
inline std::unique_ptr<tokenizer::Tokenizer> byte_all_formats_tokenizer() {
  static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string ranks;
  for (int b = 0; b < 256; ++b)
    ranks += std::string{b64[b >> 2], b64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
  tokenizer::TiktokenOptions opt;
  opt.pattern = tokenizer::TiktokenPattern::o200k_base;
  int32_t id = 256;
  for (const char* s : {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
                        "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                        "<｜tool▁sep｜>", "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>",
                        "<｜tool▁output▁end｜>", "<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>",
                        "<|im_end|>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>",
                        "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<think>",
                        "</think>", "<|start|>", "<|channel|>", "<|constrain|>", "<|message|>", "<|end|>", "<|call|>",
                        "<|return|>", "<|im_start|>", "<tool_call>", "</tool_call>", "<tool_response>",
                        "</tool_response>"})
    opt.specials.push_back(tokenizer::SpecialToken{id++, s, true});
  return tokenizer::load_tiktoken_bytes(ranks, "byte-all-formats", opt);
}

// Feeds the same pieces to a streaming writer and a whole-response writer of one API (`make`
// with ctx, then with ctx.stream false); what the stream sent collects in stream_text.
struct BothWriters {
  using Make = std::function<std::unique_ptr<ReplyWriter>(ReplyContext, ReplyWriter::Send)>;
  std::string stream_text;
  std::unique_ptr<ReplyWriter> streamed, whole;
  BothWriters(ReplyContext ctx, const Make& make) {
    ctx.stream = true;
    streamed = make(ctx, [this](const std::string& e) { stream_text += e; });
    ctx.stream = false;
    whole = make(ctx, [](const std::string&) { FAIL() << "a whole response sent an event"; });
    streamed->begin();
    whole->begin();
  }
  void reasoning(const std::string& t) { streamed->reasoning(t), whole->reasoning(t); }
  void content(const std::string& t) { streamed->content(t), whole->content(t); }
  Json finish(const ReplyEnd& end) {
    EXPECT_TRUE(streamed->finish(end).is_null());
    return whole->finish(end);
  }
};

}  // namespace sluice::serve
