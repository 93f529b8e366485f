// libFuzzer target for the tokenizers: encode/decode must round-trip any bytes (invalid UTF-8 and
// NUL included) for every pre-tokenizer; the stream decoder must agree with the one-shot lossy
// decode; NFC must be idempotent; rank files, tokenizer.json and chat messages built from the input
// may only load/render (every chat format, ids spelling the text) or throw sluice::Error; reply
// parsing of arbitrary ids must not crash and streams exactly the one-shot parse, in every format.
// fuzz-sources: src/tokenizer/utf8.cpp src/tokenizer/byte_pair.cpp src/tokenizer/regex_splitter.cpp
// fuzz-sources: src/tokenizer/tiktoken_bpe.cpp src/tokenizer/token_table.cpp src/tokenizer/hf_tokenizer.cpp
// fuzz-sources: src/tokenizer/unicode_nfc.cpp src/tokenizer/unicode_nfc_data.cpp src/tokenizer/chat_common.cpp
// fuzz-sources: src/tokenizer/chat_k3.cpp src/tokenizer/chat_qwen3.cpp src/tokenizer/chat_parse.cpp
// fuzz-sources: src/tokenizer/chat_deepseek.cpp src/tokenizer/chat_kimi_k2.cpp src/tokenizer/chat_harmony.cpp
// fuzz-sources: src/tokenizer/chat_harmony_tools.cpp src/tokenizer/chat_parse_deepseek.cpp
// fuzz-sources: src/tokenizer/chat_parse_kimi_k2.cpp src/tokenizer/chat_parse_harmony.cpp
// fuzz-sources: src/format/json_util.cpp
// fuzz-libs: -lpcre2-8
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "fuzz_b64.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_nfc.h"
#include "tokenizer/utf8.h"

namespace {
using namespace sluice::tokenizer;

void check(bool ok) {
  if (!ok) std::abort();
}

using fuzz::b64;

constexpr ChatFormat kFormats[] = {ChatFormat::kimi_k3,          ChatFormat::qwen3,   ChatFormat::deepseek_v3,
                                   ChatFormat::deepseek_v3_0324, ChatFormat::kimi_k2, ChatFormat::kimi_k2_thinking,
                                   ChatFormat::gpt_oss};

// All bytes plus merges that make multi-byte tokens (ASCII pairs, common UTF-8 prefixes).
std::string rank_file() {
  std::string out;
  int rank = 0;
  for (int b = 0; b < 256; ++b) out += b64(std::string(1, char(b))) + " " + std::to_string(rank++) + "\n";
  for (const char* m : {"ab", "abc", " t", "he", " the", "  ", "    ", "\n\n", "\xE4\xB8", "\xE4\xB8\xAD", "12", "123",
                        "'s", "e\xCC", "e\xCC\x81", "\xF0\x9F"})
    out += b64(m) + " " + std::to_string(rank++) + "\n";
  return out;
}

// Every chat format's markers, after the K3 four (ids 272..275).
const char* const kChatSpecials[] = {
    "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>",
    "</tool_response>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
    "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>",
    "<｜tool▁outputs▁begin｜>", "<｜tool▁outputs▁end｜>", "<｜tool▁output▁begin｜>", "<｜tool▁output▁end｜>",
    "<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
    "<|start|>", "<|channel|>", "<|constrain|>", "<|message|>", "<|end|>", "<|call|>", "<|return|>"};
constexpr int32_t kFirstSpecial = 256 + 16 + 2;  // <|end_of_msg|>
constexpr int32_t kSpecialCount = 4 + int32_t(sizeof kChatSpecials / sizeof kChatSpecials[0]);

struct Fixture {
  std::vector<std::unique_ptr<Tokenizer>> tiktoken;
  std::unique_ptr<Tokenizer> k3, all;
  Fixture() {
    for (auto p : {TiktokenPattern::kimi_k3, TiktokenPattern::cl100k_base, TiktokenPattern::o200k_base}) {
      TiktokenOptions opt;
      opt.pattern = p;
      tiktoken.push_back(load_tiktoken_bytes(rank_file(), "fuzz.tiktoken", opt));
    }
    TiktokenOptions opt;
    int32_t n = 256 + 16;
    opt.specials = {{n + 2, "<|end_of_msg|>", true}, {n + 3, "<|open|>", true}, {n + 4, "<|close|>", true},
                    {n + 5, "<|sep|>", true}};
    k3 = load_tiktoken_bytes(rank_file(), "fuzz-k3.tiktoken", opt);
    int32_t id = n + 6;  // inside K3's reserved block, like the four above
    for (const char* sp : kChatSpecials) opt.specials.push_back({id++, sp, true});
    all = load_tiktoken_bytes(rank_file(), "fuzz-chat.tiktoken", opt);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fx;
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 6) {
    case 0:
    case 1: {
      for (const auto& tok : fx.tiktoken) {
        std::vector<int32_t> ids = tok->encode(input);
        check(tok->decode(ids) == input);
      }
      std::string norm;
      if (utf8_is_valid(input) && nfc_normalize(input, norm)) {
        std::string again;
        check(!nfc_normalize(norm, again));
      }
      break;
    }
    case 2: {
      Utf8StreamDecoder dec;
      std::string streamed;
      size_t step = 1 + (input.empty() ? 0 : uint8_t(input[0]) % 5);
      for (size_t i = 0; i < input.size(); i += step) streamed += dec.push(std::string_view(input).substr(i, step));
      streamed += dec.finish();
      check(streamed == utf8_replace_invalid(input));
      check(utf8_is_valid(streamed));
      break;
    }
    case 3: {
      try {
        auto tok = load_tiktoken_bytes(input, "fuzz-input.tiktoken", {});
        check(tok->decode(tok->encode("fuzz the text 123")) == "fuzz the text 123");
      } catch (const sluice::Error&) {
      }
      break;
    }
    case 4: {
      try {
        auto tok = load_tokenizer_json_bytes(input, "fuzz-input.json");
        (void)tok->encode("fuzz the text 123");
      } catch (const sluice::Error&) {
      }
      break;
    }
    default: {
      ChatJson messages = ChatJson::parse(input, nullptr, false);
      if (!messages.is_discarded()) {
        ChatOptions o;
        o.current_date = "2025-01-01";
        if (input.size() % 3 == 0) o.tools = messages;  // arbitrary JSON where a tools array goes
        for (ChatFormat f : kFormats) {
          try {
            RenderedChat r = render_chat(*fx.all, f, messages, o);
            check(fx.all->decode(r.ids) == r.text);
          } catch (const sluice::Error&) {
          }
        }
      }
      std::vector<int32_t> ids;
      for (unsigned char c : input) ids.push_back(c % 2 ? int32_t(256 + 16 + (c >> 1) % 6) : int32_t(c));
      // Streaming one id at a time must give exactly the one-shot parse, for every format.
      bool opened = input.size() % 2;
      std::vector<int32_t> any_ids;
      for (unsigned char c : input) any_ids.push_back(c % 2 ? kFirstSpecial + (c >> 1) % kSpecialCount : int32_t(c));
      std::vector<int32_t> text_ids = fx.tiktoken[0]->encode(input);
      for (ChatFormat f : kFormats) {
        const Tokenizer& tok = f == ChatFormat::kimi_k3 || f == ChatFormat::qwen3 ? *fx.k3 : *fx.all;
        const std::vector<int32_t>& feed = f == ChatFormat::kimi_k3 ? ids : f == ChatFormat::qwen3 ? text_ids : any_ids;
        const ParsedReply whole = f == ChatFormat::qwen3 ? parse_qwen3_reply(input, opened)
                                                          : parse_reply(tok, f, feed, opened);
        if (f == ChatFormat::kimi_k3) {
          const ParsedReply k3 = parse_k3_reply(tok, feed, opened);
          check(k3.reasoning == whole.reasoning && k3.content == whole.content);
        }
        ReplyStream s(tok, f, opened);
        std::string reasoning, content;
        for (int32_t id : feed) {
          ReplyStream::Delta d = s.push(std::span<const int32_t>(&id, 1));
          reasoning += d.reasoning;
          content += d.content;
        }
        ReplyStream::Delta d = s.flush();
        check(reasoning + d.reasoning == whole.reasoning);
        check(content + d.content == whole.content);
        check(s.finish().tool_calls.size() == whole.tool_calls.size());
      }
    }
  }
  return 0;
}
