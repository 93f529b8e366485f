// Tool calls through the server's reply path: a K3 reply with reasoning, content and a tool call
// is split by the streaming parser, turned into OpenAI `tool_calls`, and rendering that message
// back as conversation history gives exactly the reply's tokens (the round trip clients rely on).
#include <gtest/gtest.h>

#include <string>

#include "serve/service.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace sluice::serve {
namespace {

using tokenizer::ChatFormat;

// Byte-level ranks with K3 specials after them (ids 256..), enough for the chat format.
std::unique_ptr<tokenizer::Tokenizer> byte_k3_tokenizer() {
  static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string ranks;
  for (int b = 0; b < 256; ++b)
    ranks += std::string{b64[b >> 2], b64[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
  tokenizer::TiktokenOptions opt;
  for (auto [id, s] : {std::pair<int, const char*>{256, "[BOS]"}, {257, "[EOS]"}, {258, "<|open|>"}, {259, "<|close|>"},
                       {260, "<|sep|>"}, {261, "<|end_of_msg|>"}})
    opt.specials.push_back(tokenizer::SpecialToken{id, s, true});
  return tokenizer::load_tiktoken_bytes(ranks, "byte-k3", opt);
}

TEST(ServeTools, K3ToolCallRoundTrip) {
  auto tok = byte_k3_tokenizer();
  ASSERT_EQ(tokenizer::detect_chat_format(*tok), ChatFormat::kimi_k3);
  Json user = Json::array({Json{{"role", "user"}, {"content", "Weather in Oslo?"}}});
  Json assistant = {{"role", "assistant"},
                    {"reasoning_content", "I should call the tool."},
                    {"content", "Checking."},
                    {"tool_calls", Json::array({Json{{"id", "call_0"},
                                                     {"type", "function"},
                                                     {"function", {{"name", "get_weather"},
                                                                   {"arguments", R"({"city":"Oslo","days":2})"}}}}})}};
  // What the model would generate: the history render of the assistant turn minus the prompt.
  auto prompt = tokenizer::render_chat(*tok, ChatFormat::kimi_k3, user).ids;
  Json both = user;
  both.push_back(assistant);
  tokenizer::ChatOptions no_gen;
  no_gen.add_generation_prompt = false;
  auto full = tokenizer::render_chat(*tok, ChatFormat::kimi_k3, both, no_gen).ids;
  ASSERT_GT(full.size(), prompt.size());
  ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), full.begin()));
  std::vector<int32_t> reply(full.begin() + long(prompt.size()), full.end());

  // Streamed token by token, as the server does.
  tokenizer::ReplyStream stream(*tok, ChatFormat::kimi_k3, /*prompt_opened_think=*/true);
  std::string reasoning, content;
  for (int32_t id : reply) {
    auto d = stream.push(std::span<const int32_t>(&id, 1));
    reasoning += d.reasoning;
    content += d.content;
  }
  auto parsed = stream.finish();
  EXPECT_TRUE(parsed.complete);
  EXPECT_EQ(parsed.reasoning, "I should call the tool.");
  EXPECT_EQ(parsed.content, "Checking.");
  EXPECT_EQ(reasoning + parsed.reasoning.substr(reasoning.size()), parsed.reasoning);
  int n = 0;
  Json calls = openai_tool_calls(parsed.tool_calls, [&] { return "call_" + std::to_string(n++); });
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(Json::parse(calls[0]["function"]["arguments"].get<std::string>()), Json::parse(R"({"city":"Oslo","days":2})"));

  // The client sends the message back as history: the render reproduces the generated tokens.
  Json back = {{"role", "assistant"}, {"reasoning_content", parsed.reasoning}, {"content", parsed.content},
               {"tool_calls", calls}};
  Json again = user;
  again.push_back(back);
  EXPECT_EQ(tokenizer::render_chat(*tok, ChatFormat::kimi_k3, again, no_gen).ids, full);
}

}  // namespace
}  // namespace sluice::serve
