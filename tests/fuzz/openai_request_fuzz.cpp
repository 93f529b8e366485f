// libFuzzer target for HTTP request bodies of every OpenAI route that parses one (POST
// /v1/completions, /v1/chat/completions and /v1/responses, which maps onto a chat request; the GET
// routes read no body) and for what a chat request feeds the chat
// templates: the input is the raw body. parse_body and both request parsers may only succeed or
// throw serve::ApiError with a 4xx status (whose error body must dump); an accepted chat request is
// rendered in every chat format with the options serve/chat_options.cpp derives from it (a format
// that refuses the request is skipped), which may only succeed or throw sluice::Error, and must
// produce ids that spell the rendered text.
// fuzz-sources: src/serve/openai_request.cpp src/serve/responses_request.cpp src/serve/chat_options.cpp
// fuzz-sources: src/format/json_util.cpp
// fuzz-sources: src/core/regular_file.cpp
// fuzz-sources: src/tokenizer/utf8.cpp src/tokenizer/byte_pair.cpp src/tokenizer/regex_splitter.cpp
// fuzz-sources: src/tokenizer/tiktoken_bpe.cpp src/tokenizer/token_table.cpp src/tokenizer/hf_tokenizer.cpp
// fuzz-sources: src/tokenizer/unicode_nfc.cpp src/tokenizer/unicode_nfc_data.cpp src/tokenizer/chat_common.cpp
// fuzz-sources: src/tokenizer/chat_k3.cpp src/tokenizer/chat_qwen3.cpp src/tokenizer/chat_parse.cpp
// fuzz-sources: src/tokenizer/chat_deepseek.cpp src/tokenizer/chat_kimi_k2.cpp src/tokenizer/chat_harmony.cpp
// fuzz-sources: src/tokenizer/chat_harmony_tools.cpp src/tokenizer/chat_parse_deepseek.cpp
// fuzz-sources: src/tokenizer/chat_parse_kimi_k2.cpp src/tokenizer/chat_parse_harmony.cpp
// fuzz-libs: -lpcre2-8
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/error.h"
#include "fuzz_chat.h"
#include "serve/chat_options.h"
#include "serve/openai_request.h"
#include "serve/responses_request.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace {
using namespace sluice;
using namespace sluice::tokenizer;

void check(bool ok) {
  if (!ok) std::abort();
}

// Every chat format, with the options and argument forms serve/service.cpp derives from the request
// (a format that refuses the request's fields is skipped, as the server answers 400).
void render(const Tokenizer& tok, const serve::ChatRequest& c) {
  for (ChatFormat f : fuzz::kChatFormats) {
    ChatOptions o;
    try {
      o = serve::chat_options_for(f, c);
    } catch (const serve::ApiError& e) {
      check(e.status == 400);
      continue;
    }
    o.current_date = "2025-01-01";
    try {
      RenderedChat r = render_chat(tok, f, adapt_tool_arguments(f, c.messages), o);
      check(!r.ids.empty() && tok.decode(r.ids) == r.text);
    } catch (const Error&) {
    }
  }
}

void check_error(const serve::ApiError& e) {
  check(e.status >= 400 && e.status < 500 && !e.message.empty());
  (void)serve::error_body(e).dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<Tokenizer> tok = fuzz::chat_tokenizer();
  const std::string body(reinterpret_cast<const char*>(data), size);
  serve::RequestLimits limits;
  limits.model_id = "fuzz";
  limits.max_tokens = 4096;
  serve::Json j;
  try {
    j = serve::parse_body(body);
  } catch (const serve::ApiError& e) {
    check_error(e);
    return 0;
  }
  check(j.is_object());
  try {
    serve::CompletionRequest c = serve::parse_completion_request(j, limits);
    check(c.max_tokens >= 0);
  } catch (const serve::ApiError& e) {
    check_error(e);
  }
  try {
    serve::ChatRequest c = serve::parse_chat_request(j, limits);
    check(c.messages.is_array());
    (void)c.messages.dump();
    (void)c.tools.dump();
    (void)c.response_format.dump();
    render(*tok, c);
  } catch (const serve::ApiError& e) {
    check_error(e);
  }
  try {
    serve::ResponsesRequest r = serve::parse_responses_request(j, limits);
    check(r.chat.messages.is_array() && r.echo.is_object());
    (void)r.echo.dump();
    render(*tok, r.chat);
  } catch (const serve::ApiError& e) {
    check_error(e);
  }
  return 0;
}
