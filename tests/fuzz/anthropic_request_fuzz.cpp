// libFuzzer target for POST /v1/messages bodies (the Anthropic Messages request parser) and what a
// request feeds the chat templates: the input is the raw body. parse_body and
// parse_messages_request may only succeed or throw serve::ApiError with a 4xx status (whose
// Anthropic-shaped error body must dump); an accepted request's converted messages are rendered in
// every chat format with the options messages_chat_options derives (a format that refuses them is
// skipped), which may only succeed or throw sluice::Error, and must produce ids that spell the
// rendered text; a tool call written with any arguments text becomes an object input.
// fuzz-sources: src/serve/anthropic_request.cpp src/serve/anthropic_reply.cpp src/serve/reply_writer.cpp
// fuzz-sources: src/serve/openai_request.cpp
// fuzz-sources: src/serve/chat_options.cpp src/serve/sse.cpp src/format/json_util.cpp src/core/regular_file.cpp
// fuzz-sources: src/tokenizer/utf8.cpp src/tokenizer/byte_pair.cpp src/tokenizer/regex_splitter.cpp
// fuzz-sources: src/tokenizer/tiktoken_bpe.cpp src/tokenizer/token_table.cpp src/tokenizer/hf_tokenizer.cpp
// fuzz-sources: src/tokenizer/unicode_nfc.cpp src/tokenizer/unicode_nfc_data.cpp src/tokenizer/chat_common.cpp
// fuzz-sources: src/tokenizer/chat_k3.cpp src/tokenizer/chat_qwen3.cpp src/tokenizer/chat_parse.cpp
// fuzz-sources: src/tokenizer/chat_deepseek.cpp src/tokenizer/chat_kimi_k2.cpp src/tokenizer/chat_harmony.cpp
// fuzz-sources: src/tokenizer/chat_harmony_tools.cpp src/tokenizer/chat_parse_deepseek.cpp
// fuzz-sources: src/tokenizer/chat_parse_kimi_k2.cpp src/tokenizer/chat_parse_harmony.cpp
// fuzz-sources: src/fetch/sha256.cpp
// fuzz-libs: -lpcre2-8 -lcrypto
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/error.h"
#include "fuzz_chat.h"
#include "serve/anthropic_reply.h"
#include "serve/anthropic_request.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace {
using namespace sluice;
using namespace sluice::tokenizer;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_error(const serve::ApiError& e) {
  check(e.status >= 400 && e.status < 500 && !e.message.empty());
  (void)serve::anthropic_error_body(e).dump();
}

void render(const Tokenizer& tok, const serve::MessagesRequest& r) {
  for (ChatFormat f : fuzz::kChatFormats) {
    ChatOptions o;
    try {
      o = serve::messages_chat_options(f, r);
    } catch (const serve::ApiError& e) {
      check(e.status == 400);
      continue;
    }
    o.current_date = "2025-01-01";
    try {
      RenderedChat rc = render_chat(tok, f, adapt_tool_arguments(f, r.chat.messages), o);
      check(!rc.ids.empty() && tok.decode(rc.ids) == rc.text);
    } catch (const Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<Tokenizer> tok = fuzz::chat_tokenizer();
  const std::string body(reinterpret_cast<const char*>(data), size);
  check(serve::tool_use_input(body).is_object());
  serve::RequestLimits limits;
  limits.model_id = "fuzz";
  serve::Json j;
  try {
    j = serve::parse_body(body);
  } catch (const serve::ApiError& e) {
    check_error(e);
    return 0;
  }
  try {
    serve::MessagesRequest r = serve::parse_messages_request(j, limits);
    check(r.chat.max_tokens >= 1 && r.chat.messages.is_array() && !r.chat.messages.empty());
    check(r.chat.sampling.temperature >= 0 && r.chat.sampling.temperature <= 1 && r.chat.sampling.top_k >= 0);
    (void)r.chat.messages.dump();
    (void)r.chat.tools.dump();
    render(*tok, r);
  } catch (const serve::ApiError& e) {
    check_error(e);
  }
  return 0;
}
