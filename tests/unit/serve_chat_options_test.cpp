// The server's per-format chat options: reasoning_effort, tool_choice and response_format map onto
// what each chat format can express, and everything else is refused naming the field.
#include <gtest/gtest.h>

#include "serve/chat_options.h"

namespace sluice::serve {
namespace {

using tokenizer::ChatFormat;

ChatRequest request(const std::string& effort, const std::string& tool_choice = "", Json response_format = nullptr) {
  ChatRequest r;
  r.reasoning_effort = effort;
  r.tool_choice = tool_choice;
  r.response_format = std::move(response_format);
  r.tools = Json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  return r;
}

std::string refused_param(ChatFormat f, const ChatRequest& r) {
  try {
    chat_options_for(f, r);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "unsupported_value");
    return e.param;
  }
  return "";
}

TEST(ServeChatOptions, EffortsPerFormat) {
  // gpt-oss: low / medium / high into the system message; it cannot stop reasoning.
  for (const char* e : {"", "low", "medium", "high"}) {
    tokenizer::ChatOptions o = chat_options_for(ChatFormat::gpt_oss, request(e));
    EXPECT_EQ(o.reasoning_effort, e);
    EXPECT_EQ(o.tools, request(e).tools);
  }
  EXPECT_EQ(refused_param(ChatFormat::gpt_oss, request("none")), "reasoning_effort");
  EXPECT_EQ(refused_param(ChatFormat::gpt_oss, request("max")), "reasoning_effort");
  // K3: low / high / max as its thinking effort, none turns thinking off; no medium.
  EXPECT_EQ(chat_options_for(ChatFormat::kimi_k3, request("max")).thinking_effort, "max");
  EXPECT_FALSE(chat_options_for(ChatFormat::kimi_k3, request("none")).thinking);
  EXPECT_EQ(refused_param(ChatFormat::kimi_k3, request("medium")), "reasoning_effort");
  EXPECT_EQ(chat_options_for(ChatFormat::kimi_k3, request("", "required")).tool_choice, "required");
  // Qwen3: thinking on/off only.
  EXPECT_FALSE(chat_options_for(ChatFormat::qwen3, request("none")).thinking);
  EXPECT_EQ(refused_param(ChatFormat::qwen3, request("high")), "reasoning_effort");
  // Formats without reasoning accept only "none"; K2-Thinking always thinks.
  for (ChatFormat f : {ChatFormat::deepseek_v3, ChatFormat::deepseek_v3_0324, ChatFormat::kimi_k2}) {
    EXPECT_FALSE(chat_options_for(f, request("none")).thinking);
    EXPECT_NO_THROW(chat_options_for(f, request("")));
    EXPECT_EQ(refused_param(f, request("low")), "reasoning_effort");
  }
  EXPECT_NO_THROW(chat_options_for(ChatFormat::kimi_k2_thinking, request("")));
  EXPECT_EQ(refused_param(ChatFormat::kimi_k2_thinking, request("none")), "reasoning_effort");
  // Only K3's template can say "call no tool"; every format gets response formats and required
  // calls from guided decoding.
  for (ChatFormat f : {ChatFormat::qwen3, ChatFormat::deepseek_v3, ChatFormat::kimi_k2, ChatFormat::kimi_k2_thinking,
                       ChatFormat::gpt_oss}) {
    EXPECT_EQ(refused_param(f, request("", "none")), "tool_choice") << tokenizer::chat_format_name(f);
    EXPECT_NO_THROW(chat_options_for(f, request("", "", Json{{"type", "json_object"}})));
    EXPECT_NO_THROW(chat_options_for(f, request("", "required")));
    EXPECT_NO_THROW(chat_options_for(f, request("", "auto")));
  }
}

}  // namespace
}  // namespace sluice::serve
