// POST /v1/responses: requests mapped onto chat requests (input items, instructions, flat tools,
// tool_choice, reasoning effort, text formats; unknown and unsupported fields refused with the
// API's own names), and the writer: the streamed events, accumulated as the official SDK's
// accumulator does, give the same output items as the whole response, numbered in order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/responses_reply.h"
#include "serve/responses_request.h"
#include "serve/sse.h"
#include "serve_test_util.h"

namespace sluice::serve {
namespace {

const RequestLimits kLimits{"tiny"};

ResponsesRequest parse(const std::string& body) { return parse_responses_request(Json::parse(body), kLimits); }

std::string param_of(const std::string& body) {
  try {
    parse(body);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    return e.param;
  }
  ADD_FAILURE() << "accepted: " << body;
  return "";
}

TEST(ServeResponses, InputItemsBecomeChatMessages) {
  ResponsesRequest r = parse(R"({"model": "tiny", "instructions": "Be brief.", "input": "Hi", "max_output_tokens": 9})");
  EXPECT_EQ(r.chat.messages, Json::parse(R"([{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": "Hi"}])"));
  EXPECT_EQ(r.chat.max_tokens, 9);
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_FALSE(r.echo.contains("store"));  // the writer says false: nothing is stored

  // An agent's turn: its reasoning, two calls, their outputs, then the user again.
  r = parse(R"({"model": "tiny", "input": [
      {"role": "developer", "content": [{"type": "input_text", "text": "Use tools."}]},
      {"type": "message", "role": "user", "content": "Weather in Oslo and Rome?"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Two calls."}]},
      {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\":\"Oslo\"}"},
      {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": "{\"city\":\"Rome\"}", "status": "completed"},
      {"type": "function_call_output", "call_id": "c1", "output": "5 C"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "20 C"}]},
      {"role": "assistant", "content": [{"type": "output_text", "text": "Cold and warm.", "annotations": []}]},
      {"role": "user", "content": "Thanks"}],
    "tools": [{"type": "function", "name": "weather", "description": "Weather now", "strict": true,
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "function", "name": "weather"}, "parallel_tool_calls": false,
    "reasoning": {"effort": "high"}, "store": true})");
  EXPECT_EQ(r.chat.messages, Json::parse(R"([
      {"role": "system", "content": "Use tools."},
      {"role": "user", "content": "Weather in Oslo and Rome?"},
      {"role": "assistant", "content": null, "reasoning_content": "Two calls.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}]},
      {"role": "tool", "content": "5 C", "tool_call_id": "c1"},
      {"role": "tool", "content": "20 C", "tool_call_id": "c2"},
      {"role": "assistant", "content": "Cold and warm."},
      {"role": "user", "content": "Thanks"}])"));
  EXPECT_EQ(r.chat.tools[0]["function"]["name"], "weather");
  EXPECT_EQ(r.chat.tools[0]["function"]["strict"], true);
  EXPECT_EQ(r.chat.tool_choice, "required");
  EXPECT_EQ(r.chat.tool_name, "weather");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  EXPECT_EQ(r.chat.reasoning_effort, "high");
  EXPECT_EQ(r.echo["tool_choice"], Json::parse(R"({"type": "function", "name": "weather"})"));
}

TEST(ServeResponses, TextFormatsAreResponseFormats) {
  ResponsesRequest r = parse(R"({"model": "tiny", "input": "x", "text": {"format": {"type": "json_schema",
      "name": "p", "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})");
  EXPECT_EQ(r.chat.response_format["type"], "json_schema");
  EXPECT_EQ(r.chat.response_format["json_schema"]["schema"]["properties"]["a"]["type"], "integer");
  EXPECT_EQ(r.echo["text"]["format"]["name"], "p");
  r = parse(R"({"model": "tiny", "input": "x", "text": {"format": {"type": "json_object"}}})");
  EXPECT_EQ(r.chat.response_format["type"], "json_object");
  r = parse(R"({"model": "tiny", "input": "x", "reasoning": {"effort": "minimal"}})");
  EXPECT_EQ(r.chat.reasoning_effort, "low");
}

TEST(ServeResponses, UnknownAndUnsupportedFieldsAreRefusedByName) {
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "frobnicate": 1})"), "frobnicate");
  EXPECT_EQ(param_of(R"({"model": "tiny"})"), "input");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "previous_response_id": "resp_1"})"), "previous_response_id");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "background": true})"), "background");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "include": ["reasoning.encrypted_content"]})"), "include");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "truncation": "auto"})"), "truncation");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": [{"role": "user", "content": [{"type": "input_image"}]}]})"),
            "input[0].content[0].type");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": [{"type": "web_search_call"}]})"), "input[0].type");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})"),
            "input[0].call_id");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": [{"role": "user", "content": "x", "colour": 1}]})"),
            "input[0].colour");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "tools": [{"type": "web_search"}]})"), "tools[0].type");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "tools": [{"type": "function", "name": "f", "x": 1}]})"),
            "tools[0].x");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "text": {"format": {"type": "json_object", "schema": {}}}})"),
            "text.format.schema");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "text": {"format": {"type": "yaml"}}})"), "text.format.type");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "reasoning": {"effort": "high", "x": 1}})"), "reasoning.x");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "temperature": 3})"), "temperature");
  EXPECT_EQ(param_of(R"({"model": "tiny", "input": "x", "tool_choice": "required"})"), "tool_choice");
  try {
    parse(R"({"model": "other", "input": "x"})");
    ADD_FAILURE() << "another model accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
  }
}

// Named events as a list of JSON objects.
std::vector<Json> events_of(const std::string& text) {
  std::vector<Json> out;
  size_t at = 0;
  while ((at = text.find("data: ", at)) != std::string::npos) {
    const size_t end = text.find("\n\n", at);
    out.push_back(Json::parse(text.substr(at + 6, end - at - 6)));
    const size_t name = text.rfind("event: ", at);
    EXPECT_EQ(text.substr(name + 7, at - name - 8), out.back()["type"].get<std::string>());
    at = end;
  }
  return out;
}

// The official SDK's accumulator, reduced to what it checks and builds.
Json accumulate(const std::vector<Json>& events) {
  Json r;
  int64_t seq = 0;
  for (const Json& e : events) {
    EXPECT_EQ(e["sequence_number"], seq++);
    const std::string t = e["type"];
    if (t == "response.created") {
      r = e["response"];
      continue;
    }
    EXPECT_FALSE(r.is_null()) << "an event before response.created";
    if (t == "response.output_item.added") {
      EXPECT_EQ(e["output_index"], r["output"].size());
      r["output"].push_back(e["item"]);
    } else if (t == "response.output_item.done") {
      r["output"][e["output_index"].get<size_t>()] = e["item"];
    } else if (t == "response.content_part.added") {
      r["output"][e["output_index"].get<size_t>()]["content"].push_back(e["part"]);
    } else if (t == "response.output_text.delta" || t == "response.reasoning_text.delta") {
      Json& part = r["output"][e["output_index"].get<size_t>()]["content"][e["content_index"].get<size_t>()];
      EXPECT_EQ(part["type"], t == "response.output_text.delta" ? "output_text" : "reasoning_text");
      part["text"] = part["text"].get<std::string>() + e["delta"].get<std::string>();
    } else if (t == "response.function_call_arguments.delta") {
      Json& item = r["output"][e["output_index"].get<size_t>()];
      item["arguments"] = item["arguments"].get<std::string>() + e["delta"].get<std::string>();
    } else if (t == "response.completed" || t == "response.incomplete") {
      EXPECT_EQ(e["response"]["output"], r["output"]) << "the final response holds the accumulated items";
      r = e["response"];
    }
  }
  return r;
}

struct Both : BothWriters {
  explicit Both(bool show_reasoning = true)
      : BothWriters(ReplyContext{"resp_abc", 7, "tiny", true, false, 10, show_reasoning},
                    [](ReplyContext ctx, ReplyWriter::Send send) {
                      return make_responses_writer(std::move(ctx), {{"instructions", nullptr}, {"tools", Json::array()}},
                                                   std::move(send));
                    }) {}
};

TEST(ServeResponses, StreamedEventsBuildTheWholeResponse) {
  Both b;
  b.reasoning("Think");
  b.reasoning("ing.");
  b.content("Hel");
  b.content("lo");
  ReplyEnd end;
  end.reason = ReplyEnd::Reason::eos;
  end.tool_calls.push_back({"weather", R"({"city":"Oslo"})", "call_1"});
  end.prompt_tokens = 10;
  end.completion_tokens = 20;
  end.cached_tokens = 4;
  Json whole = b.finish(end);
  EXPECT_EQ(whole["object"], "response");
  EXPECT_EQ(whole["status"], "completed");
  EXPECT_EQ(whole["store"], false);
  EXPECT_EQ(whole["usage"]["input_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(whole["usage"]["total_tokens"], 30);
  ASSERT_EQ(whole["output"].size(), 3u);
  EXPECT_EQ(whole["output"][0]["type"], "reasoning");
  EXPECT_EQ(whole["output"][0]["content"][0]["text"], "Thinking.");
  EXPECT_EQ(whole["output"][1]["type"], "message");
  EXPECT_EQ(whole["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(whole["output"][2], Json::parse(R"({"id": "fc_call_1", "type": "function_call", "status": "completed",
      "arguments": "{\"city\":\"Oslo\"}", "call_id": "call_1", "name": "weather"})"));
  const std::vector<Json> events = events_of(b.stream_text);
  EXPECT_EQ(events.front()["type"], "response.created");
  EXPECT_EQ(events.back()["type"], "response.completed");
  Json streamed = accumulate(events);
  EXPECT_EQ(streamed["output"], whole["output"]);
  EXPECT_EQ(streamed["usage"], whole["usage"]);
}

TEST(ServeResponses, CutAtMaxOutputTokensIsIncompleteAndHiddenReasoningStaysOut) {
  Both b(/*show_reasoning=*/false);
  b.reasoning("hidden");
  b.content("partial");
  ReplyEnd end;  // Reason::length
  Json whole = b.finish(end);
  EXPECT_EQ(whole["status"], "incomplete");
  EXPECT_EQ(whole["incomplete_details"]["reason"], "max_output_tokens");
  ASSERT_EQ(whole["output"].size(), 1u);
  EXPECT_EQ(whole["output"][0]["type"], "message");
  const std::vector<Json> events = events_of(b.stream_text);
  EXPECT_EQ(events.back()["type"], "response.incomplete");
  EXPECT_EQ(accumulate(events)["output"], whole["output"]);
}

}  // namespace
}  // namespace sluice::serve
