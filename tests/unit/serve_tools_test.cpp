// Tool calls through the server's reply path: a reply with reasoning, content and tool calls (K3,
// DeepSeek-V3, Kimi K2, gpt-oss) is split by the streaming parser, turned into OpenAI `tool_calls`,
// and rendering that message back as conversation history (with the arguments adapted as the
// server does) gives exactly the reply's tokens: the round trip clients rely on.
#include <gtest/gtest.h>

#include <string>

#include "serve/service.h"
#include "serve_test_util.h"
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

TEST(ServeTools, ToolCallRoundTripInEveryFormat) {
  auto tok = byte_all_formats_tokenizer();
  Json user = Json::array({Json{{"role", "user"}, {"content", "Weather in Oslo and Paris?"}}});
  for (ChatFormat f : {ChatFormat::deepseek_v3_0324, ChatFormat::kimi_k2, ChatFormat::kimi_k2_thinking,
                       ChatFormat::gpt_oss}) {
    SCOPED_TRACE(tokenizer::chat_format_name(f));
    const bool reasons = f == ChatFormat::kimi_k2_thinking || f == ChatFormat::gpt_oss;
    // gpt-oss writes one call per turn and no content beside reasoning; Kimi's ids are the model's.
    Json calls = Json::array({Json{{"id", "functions.get_weather:0"},
                                   {"type", "function"},
                                   {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Oslo", "days": 2})"}}}}});
    if (f != ChatFormat::gpt_oss)
      calls.push_back(Json{{"id", "functions.get_weather:1"},
                           {"type", "function"},
                           {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Paris"})"}}}});
    Json assistant = {{"role", "assistant"}, {"content", f == ChatFormat::gpt_oss ? "" : "Checking — ünï."}};
    if (reasons) assistant["reasoning_content"] = "Two lookups.";
    assistant["tool_calls"] = calls;
    tokenizer::ChatOptions gen, no_gen;
    gen.current_date = no_gen.current_date = "2025-01-01";
    no_gen.add_generation_prompt = false;
    auto prompt = tokenizer::render_chat(*tok, f, user, gen).ids;
    Json both = user;
    both.push_back(assistant);
    auto full = tokenizer::render_chat(*tok, f, tokenizer::adapt_tool_arguments(f, both), no_gen).ids;
    ASSERT_GT(full.size(), prompt.size());
    ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), full.begin()));
    std::vector<int32_t> reply(full.begin() + long(prompt.size()), full.end());

    tokenizer::ReplyStream stream(*tok, f, tokenizer::prompt_opens_think(f, gen));
    for (int32_t id : reply) stream.push(std::span<const int32_t>(&id, 1));
    auto parsed = stream.finish();
    EXPECT_TRUE(parsed.complete);
    EXPECT_EQ(parsed.reasoning, reasons ? "Two lookups." : "");
    EXPECT_EQ(parsed.content, assistant["content"].get<std::string>());
    int n = 0;
    Json back_calls = openai_tool_calls(parsed.tool_calls, [&] { return "call_" + std::to_string(n++); });
    ASSERT_EQ(back_calls.size(), calls.size());
    for (size_t k = 0; k < calls.size(); ++k) {
      EXPECT_EQ(back_calls[k]["function"]["name"], "get_weather");
      EXPECT_EQ(Json::parse(back_calls[k]["function"]["arguments"].get<std::string>()),
                Json::parse(calls[k]["function"]["arguments"].get<std::string>()));
      // Kimi K2's ids are the model's own ("functions.NAME:INDEX"), which its template writes back.
      if (f == ChatFormat::kimi_k2 || f == ChatFormat::kimi_k2_thinking) EXPECT_EQ(back_calls[k]["id"], calls[k]["id"]);
      else EXPECT_EQ(back_calls[k]["id"], "call_" + std::to_string(k));
    }
    Json back = {{"role", "assistant"}, {"content", parsed.content}};
    if (reasons) back["reasoning_content"] = parsed.reasoning;
    back["tool_calls"] = back_calls;
    Json again = user;
    again.push_back(back);
    EXPECT_EQ(tokenizer::render_chat(*tok, f, tokenizer::adapt_tool_arguments(f, again), no_gen).ids, full);
  }
}

}  // namespace
}  // namespace sluice::serve
