// The Anthropic Messages route: request validation and its mapping onto chat messages, the
// per-format thinking and tool_choice mapping, the streamed event sequence and the whole message
// from the same pieces, error shapes, and a tool_use round trip through the reply parsers of every
// format (the reply's blocks, sent back as history, render the tokens the model generated).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/anthropic_reply.h"
#include "serve/anthropic_request.h"
#include "serve/sse.h"
#include "serve_test_util.h"

namespace sluice::serve {
namespace {

using tokenizer::ChatFormat;

RequestLimits limits() {
  RequestLimits l;
  l.model_id = "tiny";
  return l;
}

MessagesRequest parse(const std::string& body) { return parse_messages_request(parse_body(body), limits()); }

// The error a body gets: "status|param|message".
std::string error_of(const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    return std::to_string(e.status) + "|" + e.param + "|" + e.message;
  }
  return "accepted";
}

TEST(ServeAnthropic, MapsSystemTurnsToolsAndSampling) {
  MessagesRequest r = parse(R"({"model": "tiny", "max_tokens": 2048, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
    "stop_sequences": ["END"], "stream": true, "metadata": {"user_id": "u1"},
    "system": [{"type": "text", "text": "Be brief. "}, {"type": "text", "text": "Be kind.",
                "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any"}, "thinking": {"type": "enabled", "budget_tokens": 1024},
    "messages": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "Use the tool.", "signature": "s"},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "3 C"}]}, {"type": "text", "text": "And tomorrow?"}]}]})");
  const ChatRequest& c = r.chat;
  EXPECT_EQ(c.max_tokens, 2048);
  EXPECT_TRUE(c.stream);
  EXPECT_DOUBLE_EQ(c.sampling.temperature, 0.5);
  EXPECT_DOUBLE_EQ(c.sampling.top_p, 0.9);
  EXPECT_EQ(c.sampling.top_k, 40);
  EXPECT_EQ(c.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(c.tool_choice, "required");
  EXPECT_EQ(r.thinking, MessagesRequest::Thinking::enabled);
  EXPECT_EQ(c.messages, Json::parse(R"([
    {"role": "system", "content": "Be brief. Be kind."},
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": "Checking.", "reasoning_content": "Use the tool.",
     "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "3 C"},
    {"role": "user", "content": "And tomorrow?"}])"));
  EXPECT_EQ(c.tools, Json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
    "parameters": {"type": "object"}}}])"));

  // Defaults: Anthropic's temperature 1, auto tool choice, thinking as the format likes.
  MessagesRequest d = parse(R"({"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"hi"}],
    "tool_choice":{"type":"auto"}})");
  EXPECT_DOUBLE_EQ(d.chat.sampling.temperature, 1.0);
  EXPECT_EQ(d.chat.tool_choice, "");
  EXPECT_EQ(d.thinking, MessagesRequest::Thinking::unset);
  EXPECT_FALSE(d.chat.stream);
  // An assistant turn of tool calls only has null content, as OpenAI's has.
  MessagesRequest t = parse(R"({"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"hi"},
    {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},
    {"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]})");
  EXPECT_TRUE(t.chat.messages[1]["content"].is_null());
  EXPECT_EQ(t.chat.messages[2], Json::parse(R"({"role":"tool","tool_call_id":"a","content":""})"));
}

TEST(ServeAnthropic, RefusesWhatItCannotDoNamingTheField) {
  const std::string hi = R"("messages":[{"role":"user","content":"hi"}])";
  EXPECT_EQ(error_of(R"({"model":"tiny",)" + hi + "}"), "400|max_tokens|max_tokens: Field required.");
  EXPECT_EQ(error_of(R"({"model":"tiny","max_tokens":0,)" + hi + "}"), "400|max_tokens|max_tokens: must be at least 1.");
  EXPECT_EQ(error_of(R"({"model":"tiny","max_tokens":"9",)" + hi + "}"),
            "400|max_tokens|max_tokens: expected an integer, got a string.");
  EXPECT_EQ(error_of(R"({"model":"other","max_tokens":9,)" + hi + "}").substr(0, 10), "404|model|");
  EXPECT_EQ(error_of(R"({"model":"tiny","max_tokens":9,"frobnicate":1,)" + hi + "}"),
            "400|frobnicate|frobnicate: Extra inputs are not permitted.");
  EXPECT_EQ(error_of(R"({"model":"tiny","max_tokens":9,"temperature":1.5,)" + hi + "}"),
            "400|temperature|temperature: must be between 0.0 and 1.0.");
  auto param = [&](const std::string& body) {
    std::string e = error_of(body);
    return e.substr(0, e.find('|', 4));
  };
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"messages":[{"role":"user","content":[
    {"type":"text","text":"x"},{"type":"image","source":{}}]}]})"), "400|messages.0.content.1.type");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"messages":[{"role":"user","content":"x"},
    {"role":"assistant","content":"Sure"}]})"), "400|messages.1");  // prefill
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"messages":[{"role":"system","content":"x"}]})"),
            "400|messages.0.role");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"messages":[{"role":"user","content":"x","name":"n"}]})"),
            "400|messages.0.name");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"messages":[{"role":"user","content":"x"},
    {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":"{}"}]},
    {"role":"user","content":"y"}]})"), "400|messages.1.content.0.input");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"tools":[{"type":"web_search_20250305","name":"w"}],)" + hi + "}"),
            "400|tools.0.type");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"tools":[{"name":"f"}],)" + hi + "}"), "400|tools.0.input_schema");
  // A named tool must be among the tools (and there must be tools).
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"tool_choice":{"type":"tool","name":"f"},)" + hi + "}"),
            "400|tool_choice");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"tools":[{"name":"g","input_schema":{"type":"object"}}],)"
                  R"("tool_choice":{"type":"tool","name":"f"},)" + hi + "}"),
            "400|tool_choice.name");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"tools":[{"name":"g","input_schema":{"type":"object"}}],)"
                  R"("tool_choice":{"type":"tool"},)" + hi + "}"),
            "400|tool_choice.name");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"tool_choice":{"type":"any"},)" + hi + "}"), "400|tool_choice");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":100},)" + hi + "}"),
            "400|thinking.budget_tokens");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":1500,"thinking":{"type":"enabled","budget_tokens":1500},)" + hi + "}"),
            "400|thinking.budget_tokens");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"stop_sequences":[""],)" + hi + "}"), "400|stop_sequences.0");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"system":[{"type":"text","text":"x","cache_control":{"type":"forever"}}],)" +
                  hi + "}"),
            "400|system.0.cache_control.type");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":9,"messages":[]})"), "400|messages");
}

TEST(ServeAnthropic, ThinkingAndToolChoicePerFormat) {
  auto with = [](const std::string& extra) {
    return parse(R"({"model":"tiny","max_tokens":2048,"messages":[{"role":"user","content":"hi"}],
      "tools":[{"name":"f","input_schema":{"type":"object"}}])" + extra + "}");
  };
  auto refusal = [](ChatFormat f, const MessagesRequest& r) -> std::string {
    try {
      messages_chat_options(f, r);
    } catch (const ApiError& e) {
      return e.param;
    }
    return "";
  };
  const MessagesRequest off = with(R"(,"thinking":{"type":"disabled"})");
  const MessagesRequest on = with(R"(,"thinking":{"type":"enabled","budget_tokens":1024})");
  EXPECT_FALSE(messages_chat_options(ChatFormat::kimi_k3, off).thinking);
  EXPECT_TRUE(messages_chat_options(ChatFormat::kimi_k3, on).thinking);
  EXPECT_FALSE(messages_chat_options(ChatFormat::qwen3, off).thinking);
  // No `thinking` in the request: no thinking, as in Anthropic's API (models that can turn it off).
  EXPECT_FALSE(messages_chat_options(ChatFormat::kimi_k3, with("")).thinking);
  EXPECT_FALSE(messages_chat_options(ChatFormat::qwen3, with("")).thinking);
  EXPECT_EQ(refusal(ChatFormat::gpt_oss, with("")), "");
  EXPECT_EQ(refusal(ChatFormat::gpt_oss, off), "thinking");
  EXPECT_EQ(refusal(ChatFormat::kimi_k2_thinking, off), "thinking");
  EXPECT_EQ(refusal(ChatFormat::deepseek_v3_0324, on), "thinking");
  EXPECT_EQ(refusal(ChatFormat::kimi_k2, on), "thinking");
  EXPECT_EQ(refusal(ChatFormat::kimi_k2, off), "");
  EXPECT_EQ(refusal(ChatFormat::gpt_oss, on), "");
  const MessagesRequest any = with(R"(,"tool_choice":{"type":"any"})");
  EXPECT_EQ(messages_chat_options(ChatFormat::kimi_k3, any).tool_choice, "required");
  EXPECT_EQ(messages_chat_options(ChatFormat::kimi_k3, with(R"(,"tool_choice":{"type":"none"})")).tool_choice, "none");
  // Other templates cannot say it, but guided decoding enforces required calls in every format;
  // "none" needs the template (K3 only).
  for (ChatFormat f : {ChatFormat::qwen3, ChatFormat::deepseek_v3_0324, ChatFormat::kimi_k2, ChatFormat::gpt_oss}) {
    EXPECT_EQ(refusal(f, any), "") << tokenizer::chat_format_name(f);
    EXPECT_EQ(refusal(f, with(R"(,"tool_choice":{"type":"none"})")), "tool_choice") << tokenizer::chat_format_name(f);
  }
  EXPECT_FALSE(messages_chat_options(ChatFormat::qwen3, with("")).tools.is_null());
}

// Splits a stream of "event: X\ndata: {...}\n\n" into its events, checking the name is the type.
// Comment blocks (": keep-alive", written when a stream is silent for a second) are skipped, as
// every SSE client skips them.
std::vector<Json> events_of(const std::string& text) {
  std::vector<Json> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    std::string block = text.substr(pos, end - pos);
    if (block.starts_with(':')) {
      pos = end + 2;
      continue;
    }
    size_t nl = block.find('\n');
    EXPECT_EQ(block.substr(0, 7), "event: ");
    EXPECT_EQ(block.substr(nl + 1, 6), "data: ");
    Json j = Json::parse(block.substr(nl + 7));
    EXPECT_EQ(block.substr(7, nl - 7), j["type"].get<std::string>());
    out.push_back(std::move(j));
    pos = end + 2;
  }
  return out;
}

std::vector<std::string> types_of(const std::vector<Json>& events) {
  std::vector<std::string> t;
  for (const auto& e : events) {
    std::string s = e["type"];
    if (e.contains("content_block")) s += ":" + e["content_block"]["type"].get<std::string>();
    if (e.contains("delta") && e["delta"].contains("type")) s += ":" + e["delta"]["type"].get<std::string>();
    t.push_back(s);
  }
  return t;
}

// The same pieces to a streaming and a whole-message writer.
struct Both : BothWriters {
  explicit Both(int64_t prompt, bool show_reasoning = true)
      : BothWriters(ReplyContext{"msg_1", 0, "tiny", true, false, prompt, show_reasoning}, make_anthropic_writer) {}
};

// The blocks a stream builds, as the SDKs accumulate them.
Json accumulate(const std::vector<Json>& events) {
  Json content = Json::array();
  std::vector<std::string> partial;
  for (const auto& e : events) {
    if (e["type"] == "content_block_start") {
      EXPECT_EQ(e["index"], content.size());
      content.push_back(e["content_block"]);
      partial.emplace_back();
    } else if (e["type"] == "content_block_delta") {
      Json& b = content[e["index"].get<size_t>()];
      const Json& d = e["delta"];
      if (d["type"] == "text_delta") b["text"] = b["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "thinking_delta") b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "input_json_delta") partial[e["index"].get<size_t>()] += d["partial_json"].get<std::string>();
      if (d["type"] == "signature_delta") b["signature"] = d["signature"];
    } else if (e["type"] == "content_block_stop") {
      size_t i = e["index"];
      if (content[i]["type"] == "tool_use") content[i]["input"] = Json::parse(partial[i]);
    }
  }
  return content;
}

TEST(ServeAnthropic, StreamEventSequenceAndMessageAgree) {
  Both w(12);
  w.reasoning("Let me ");
  w.reasoning("think.");
  w.content("Calling ");
  w.content("the tool.");
  ReplyEnd end;
  end.reason = ReplyEnd::Reason::eos;
  end.tool_calls = {tokenizer::ParsedToolCall{"get_weather", R"({"city": "Oslo"})", "toolu_a"},
                    tokenizer::ParsedToolCall{"noop", "", "toolu_b"}};
  end.prompt_tokens = 12;
  end.cached_tokens = 5;
  end.completion_tokens = 9;
  end.stats.bytes_read = 4096;
  Json message = w.finish(end);
  std::vector<Json> events = events_of(w.stream_text);
  EXPECT_EQ(types_of(events),
            (std::vector<std::string>{"message_start", "ping", "content_block_start:thinking",
                                      "content_block_delta:thinking_delta", "content_block_delta:thinking_delta",
                                      "content_block_delta:signature_delta", "content_block_stop",
                                      "content_block_start:text", "content_block_delta:text_delta",
                                      "content_block_delta:text_delta", "content_block_stop",
                                      "content_block_start:tool_use", "content_block_delta:input_json_delta",
                                      "content_block_stop", "content_block_start:tool_use",
                                      "content_block_delta:input_json_delta", "content_block_stop", "message_delta",
                                      "message_stop"}));
  const Json& start = events[0]["message"];
  EXPECT_EQ(start["id"], "msg_1");
  EXPECT_EQ(start["content"], Json::array());
  EXPECT_TRUE(start["stop_reason"].is_null());
  EXPECT_EQ(start["usage"]["input_tokens"], 12);
  const Json& delta = events[17];
  EXPECT_EQ(delta["delta"], Json::parse(R"({"stop_reason": "tool_use", "stop_sequence": null})"));
  const Json usage = Json::parse(R"({"input_tokens": 7, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 5,
                                     "output_tokens": 9})");
  EXPECT_EQ(delta["usage"], usage);
  EXPECT_EQ(delta["sluice"]["bytes_read"], 4096);

  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["stop_reason"], "tool_use");
  EXPECT_EQ(message["usage"], usage);
  EXPECT_EQ(message["content"], Json::parse(R"([
    {"type": "thinking", "thinking": "Let me think.",
     "signature": "sluice-sha256:a0e90b3995069d8a3d3391fc04ca18be14292b46d4261b83471d8af012e1690f"},
    {"type": "text", "text": "Calling the tool."},
    {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Oslo"}},
    {"type": "tool_use", "id": "toolu_b", "name": "noop", "input": {}}])"));
  EXPECT_EQ(accumulate(events), message["content"]);
}

// A request that did not enable thinking gets no thinking block, streamed or whole, even from a
// model that always reasons (the reasoning is generated and counted, not shown).
TEST(ServeAnthropic, ReasoningIsLeftOutUnlessThinkingWasEnabled) {
  Both w(4, /*show_reasoning=*/false);
  w.reasoning("hidden ");
  w.content("Hello.");
  ReplyEnd end;
  end.reason = ReplyEnd::Reason::eos;
  end.completion_tokens = 5;
  Json message = w.finish(end);
  EXPECT_EQ(message["content"], Json::parse(R"([{"type": "text", "text": "Hello."}])"));
  EXPECT_EQ(accumulate(events_of(w.stream_text)), message["content"]);
  EXPECT_EQ(message["usage"]["output_tokens"], 5);
}

TEST(ServeAnthropic, StopReasonsAndEmptyReplies) {
  Both a(3);
  a.content("abc");
  ReplyEnd stop;
  stop.reason = ReplyEnd::Reason::stop_sequence;
  stop.stop_sequence = "END";
  Json m = a.finish(stop);
  EXPECT_EQ(m["stop_reason"], "stop_sequence");
  EXPECT_EQ(m["stop_sequence"], "END");
  Both b(3);
  ReplyEnd length;
  Json e = b.finish(length);
  EXPECT_EQ(e["stop_reason"], "max_tokens");
  EXPECT_EQ(e["content"], Json::array());
  EXPECT_EQ(types_of(events_of(b.stream_text)),
            (std::vector<std::string>{"message_start", "ping", "message_delta", "message_stop"}));
  Both c(3);
  c.content("x");
  c.reasoning("y");  // reasoning after text opens a new block
  ReplyEnd eos;
  eos.reason = ReplyEnd::Reason::eos;
  Json f = c.finish(eos);
  EXPECT_EQ(f["stop_reason"], "end_turn");
  EXPECT_EQ(f["content"].size(), 2u);
  EXPECT_EQ(accumulate(events_of(c.stream_text)), f["content"]);
}

TEST(ServeAnthropic, ErrorShapesAndToolInput) {
  EXPECT_EQ(anthropic_error_body(ApiError(400, "bad", "invalid_request_error", "x", "y")),
            Json::parse(R"({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})"));
  const std::pair<int, const char*> types[] = {{401, "authentication_error"}, {404, "not_found_error"},
                                               {413, "request_too_large"},   {429, "rate_limit_error"},
                                               {529, "overloaded_error"},    {500, "api_error"},
                                               {503, "api_error"},           {408, "invalid_request_error"}};
  for (auto [status, type] : types)
    EXPECT_EQ(anthropic_error_body(ApiError(status, "m", "t"))["error"]["type"], type) << status;
  EXPECT_EQ(sse_named_event(Json{{"type", "ping"}}), "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  EXPECT_EQ(tool_use_input(R"({"a": [1, 2]})"), Json::parse(R"({"a": [1, 2]})"));
  EXPECT_EQ(tool_use_input(" \n"), Json::object());
  EXPECT_EQ(tool_use_input("[1]"), Json::parse(R"({"arguments_text": "[1]"})"));
  EXPECT_EQ(tool_use_input("{oops"), Json::parse(R"({"arguments_text": "{oops"})"));
}

// A reply with reasoning, text and tool calls, generated in each format's own markers, comes back
// as Anthropic blocks; sent back as history (with a tool result after it), the blocks render the
// very tokens the model generated.
TEST(ServeAnthropic, ToolUseRoundTripInEveryFormat) {
  auto tok = byte_all_formats_tokenizer();
  const Json user = Json::array({Json{{"role", "user"}, {"content", "Weather in Oslo?"}}});
  for (ChatFormat f : {ChatFormat::qwen3, ChatFormat::deepseek_v3_0324, ChatFormat::kimi_k2,
                       ChatFormat::kimi_k2_thinking, ChatFormat::gpt_oss}) {
    SCOPED_TRACE(tokenizer::chat_format_name(f));
    const bool reasons = f == ChatFormat::kimi_k2_thinking || f == ChatFormat::gpt_oss || f == ChatFormat::qwen3;
    const bool kimi = f == ChatFormat::kimi_k2 || f == ChatFormat::kimi_k2_thinking;
    Json assistant = {{"role", "assistant"}, {"content", f == ChatFormat::gpt_oss ? "" : "Checking."}};
    if (reasons) assistant["reasoning_content"] = "One lookup.";
    assistant["tool_calls"] = Json::array({Json{{"id", kimi ? "functions.get_weather:0" : "toolu_0"},
                                                {"type", "function"},
                                                {"function", {{"name", "get_weather"}, {"arguments", R"({"city": "Oslo"})"}}}}});
    tokenizer::ChatOptions gen, no_gen;
    gen.current_date = no_gen.current_date = "2025-01-01";
    no_gen.add_generation_prompt = false;
    auto prompt = tokenizer::render_chat(*tok, f, user, gen).ids;
    Json both = user;
    both.push_back(assistant);
    auto full = tokenizer::render_chat(*tok, f, tokenizer::adapt_tool_arguments(f, both), no_gen).ids;
    ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), full.begin()));

    // The server's path: the reply parser's deltas into the Anthropic writer.
    tokenizer::ReplyStream stream(*tok, f, tokenizer::prompt_opens_think(f, gen));
    Both w(int64_t(prompt.size()));
    for (size_t i = prompt.size(); i < full.size(); ++i) {
      auto d = stream.push(std::span<const int32_t>(&full[i], 1));
      if (!d.reasoning.empty()) w.reasoning(d.reasoning);
      if (!d.content.empty()) w.content(d.content);
    }
    auto parsed = stream.finish();
    ReplyEnd end;
    end.reason = ReplyEnd::Reason::eos;
    end.tool_calls = parsed.tool_calls;
    for (auto& c : end.tool_calls)
      if (c.id.empty()) c.id = "toolu_0";
    Json message = w.finish(end);
    EXPECT_EQ(message["stop_reason"], "tool_use");
    ASSERT_FALSE(message["content"].empty());
    const Json& call = message["content"].back();
    EXPECT_EQ(call["type"], "tool_use");
    EXPECT_EQ(call["name"], "get_weather");
    EXPECT_EQ(call["input"], Json::parse(R"({"city": "Oslo"})"));
    EXPECT_EQ(call["id"], assistant["tool_calls"][0]["id"]);
    EXPECT_EQ(accumulate(events_of(w.stream_text)), message["content"]);

    Json body = {{"model", "tiny"},
                 {"max_tokens", 8},
                 {"messages", Json::array({Json{{"role", "user"}, {"content", "Weather in Oslo?"}},
                                           Json{{"role", "assistant"}, {"content", message["content"]}},
                                           Json{{"role", "user"},
                                                {"content", Json::array({Json{{"type", "tool_result"},
                                                                              {"tool_use_id", call["id"]},
                                                                              {"content", "3 C"}}})}}})}};
    MessagesRequest r = parse_messages_request(body, limits());
    Json history = Json::array({r.chat.messages[0], r.chat.messages[1]});
    EXPECT_EQ(tokenizer::render_chat(*tok, f, tokenizer::adapt_tool_arguments(f, history), no_gen).ids, full);
    // The whole request renders too (the tool result after the call).
    EXPECT_NO_THROW(tokenizer::render_chat(*tok, f, tokenizer::adapt_tool_arguments(f, r.chat.messages),
                                           messages_chat_options(f, r)));
  }
}

}  // namespace
}  // namespace sluice::serve
