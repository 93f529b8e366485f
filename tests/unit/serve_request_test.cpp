// Request validation of the OpenAI-compatible server: accepted shapes, defaults, and the
// OpenAI-shaped 400s (param and code) for unknown fields, wrong types and unsupported values.
#include <gtest/gtest.h>

#include "serve/openai_request.h"

namespace sluice::serve {
namespace {

RequestLimits limits() {
  RequestLimits l;
  l.model_id = "tiny";
  return l;
}

ApiError chat_error(const std::string& body) {
  try {
    parse_chat_request(parse_body(body), limits());
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "");
}

ApiError completion_error(const std::string& body) {
  try {
    parse_completion_request(parse_body(body), limits());
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "", "");
}

TEST(ServeRequest, ChatDefaultsAndFields) {
  auto r = parse_chat_request(parse_body(R"({"model":"tiny","messages":[{"role":"developer","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],
      "temperature":0.5,"top_p":0.9,"seed":7,"stop":["\n\n","END"],"max_completion_tokens":12,"stream":true,
      "stream_options":{"include_usage":true},"n":1,"reasoning_effort":"high","user":"u","metadata":{"k":"v"},
      "presence_penalty":0,"logit_bias":{},"tools":[],"parallel_tool_calls":true,"store":false,"ignore_eos":true})"),
                              limits());
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "hi there");
  EXPECT_DOUBLE_EQ(r.sampling.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.seed, 7u);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.reasoning_effort, "high");
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_TRUE(r.ignore_eos);

  auto d = parse_chat_request(parse_body(R"({"model":"tiny","messages":[{"role":"user","content":"x"}]})"), limits());
  EXPECT_DOUBLE_EQ(d.sampling.temperature, 1.0);  // OpenAI's default
  EXPECT_EQ(d.max_tokens, 0);
  EXPECT_FALSE(d.stream);
  auto g = parse_chat_request(parse_body(R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"top_p":0})"),
                              limits());
  EXPECT_TRUE(g.sampling.greedy());
}

TEST(ServeRequest, ToolsAndToolHistoryRoundTrip) {
  auto r = parse_chat_request(parse_body(R"({"model":"tiny","tool_choice":"required","messages":[
      {"role":"user","content":"weather?"},
      {"role":"assistant","content":null,"reasoning_content":"use the tool",
       "tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"sunny"}],
      "tools":[{"type":"function","function":{"name":"get_weather","description":"d","parameters":{"type":"object"}}}]})"),
                              limits());
  EXPECT_EQ(r.tool_choice, "required");
  ASSERT_TRUE(r.tools.is_array());
  EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(r.messages[2]["tool_call_id"], "call_1");
  EXPECT_TRUE(r.tool_name.empty());
  EXPECT_TRUE(r.parallel_tool_calls);
  // A named function is a required call of that tool; parallel_tool_calls false asks for one call.
  auto n = parse_chat_request(parse_body(R"({"model":"tiny","messages":[{"role":"user","content":"x"}],
      "tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false,
      "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]})"),
                              limits());
  EXPECT_EQ(n.tool_choice, "required");
  EXPECT_EQ(n.tool_name, "get_weather");
  EXPECT_FALSE(n.parallel_tool_calls);
}

TEST(ServeRequest, UnknownAndUnsupportedFieldsAre400) {
  struct Case {
    std::string body, param, code;
  };
  const std::string m = R"("model":"tiny","messages":[{"role":"user","content":"x"}])";
  std::vector<Case> cases = {
      {"{" + m + R"(,"frobnicate":1})", "frobnicate", "unknown_parameter"},
      {"{" + m + R"(,"n":2})", "n", "unsupported_value"},
      {"{" + m + R"(,"temperature":3})", "temperature", "invalid_value"},
      {"{" + m + R"(,"temperature":"hot"})", "temperature", "invalid_type"},
      {"{" + m + R"(,"top_p":1.5})", "top_p", "invalid_value"},
      {"{" + m + R"(,"seed":1.5})", "seed", "invalid_type"},
      {"{" + m + R"(,"stop":["a","b","c","d","e"]})", "stop", "invalid_value"},
      {"{" + m + R"(,"stop":[""]})", "stop", "invalid_value"},
      {"{" + m + R"(,"stop":5})", "stop", "invalid_type"},
      {"{" + m + R"(,"max_tokens":-1})", "max_tokens", "invalid_value"},
      {"{" + m + R"(,"max_tokens":5,"max_completion_tokens":5})", "max_tokens", "invalid_value"},
      {"{" + m + R"(,"stream_options":{"include_usage":true}})", "stream_options", "invalid_value"},
      {"{" + m + R"(,"stream":true,"stream_options":{"x":true}})", "stream_options.x", "unknown_parameter"},
      {"{" + m + R"(,"stream":"yes"})", "stream", "invalid_type"},
      {"{" + m + R"(,"presence_penalty":0.5})", "presence_penalty", "unsupported_value"},
      {"{" + m + R"(,"logit_bias":{"1":2}})", "logit_bias", "unsupported_value"},
      {"{" + m + R"(,"logprobs":"yes"})", "logprobs", "invalid_type"},
      {"{" + m + R"(,"top_logprobs":3})", "top_logprobs", "invalid_value"},
      {"{" + m + R"(,"logprobs":true,"top_logprobs":21})", "top_logprobs", "invalid_value"},
      {"{" + m + R"(,"logprobs":true,"top_logprobs":1.5})", "top_logprobs", "invalid_type"},
      {"{" + m + R"(,"reasoning_effort":"extreme"})", "reasoning_effort", "invalid_value"},
      {"{" + m + R"(,"tool_choice":{"type":"function","function":{"name":"f"}}})", "tool_choice", "invalid_value"},
      {"{" + m + R"(,"tools":[{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"f"}}})",
       "tool_choice", "invalid_value"},
      {"{" + m + R"(,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"},"x":1}})",
       "tool_choice", "invalid_value"},
      {"{" + m + R"(,"tool_choice":7})", "tool_choice", "unsupported_value"},
      {"{" + m + R"(,"tool_choice":"required"})", "tool_choice", "invalid_value"},
      {"{" + m + R"(,"response_format":{"type":"yaml"}})", "response_format.type", "invalid_value"},
      {"{" + m + R"(,"response_format":{"type":"json_object","strict":true}})", "response_format.strict", "unknown_parameter"},
      {"{" + m + R"(,"response_format":{"type":"json_schema","json_schema":{"schema":{},"strcit":true}}})",
       "response_format.json_schema.strcit", "unknown_parameter"},
      {"{" + m + R"(,"modalities":["text","audio"]})", "modalities", "unsupported_value"},
      {"{" + m + R"(,"tools":[{"type":"retrieval"}]})", "tools[0].type", "unsupported_value"},
      {R"({"model":"tiny","messages":[]})", "messages", "invalid_value"},
      {R"({"model":"tiny","messages":[{"role":"wizard","content":"x"}]})", "messages[0].role", "invalid_value"},
      {R"({"model":"tiny","messages":[{"role":"user","content":"x","extra":1}]})", "messages[0].extra",
       "unknown_parameter"},
      {R"({"model":"tiny","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]})",
       "messages[0].content[0].type", "unsupported_value"},
      {R"({"model":"tiny","messages":[{"role":"user"}]})", "messages[0].content", "missing_required_parameter"},
      {R"({"model":"tiny","messages":[{"role":"user","content":5}]})", "messages[0].content", "invalid_type"},
      {R"({"messages":[{"role":"user","content":"x"}]})", "model", "missing_required_parameter"},
  };
  for (const auto& c : cases) {
    ApiError e = chat_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.code, c.code) << c.body;
    EXPECT_FALSE(e.message.empty());
  }
  ApiError wrong_model = chat_error(R"({"model":"gpt-4o","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(wrong_model.status, 404);
  EXPECT_EQ(wrong_model.code, "model_not_found");
}

TEST(ServeRequest, LogprobsAsEachEndpointSpellsThem) {
  const RequestLimits lim = limits();
  const std::string m = R"("model":"tiny","messages":[{"role":"user","content":"hi"}])";
  EXPECT_EQ(parse_chat_request(Json::parse("{" + m + "}"), lim).top_logprobs, -1);
  EXPECT_EQ(parse_chat_request(Json::parse("{" + m + R"(,"logprobs":false})"), lim).top_logprobs, -1);
  EXPECT_EQ(parse_chat_request(Json::parse("{" + m + R"(,"logprobs":true})"), lim).top_logprobs, 0);
  EXPECT_EQ(parse_chat_request(Json::parse("{" + m + R"(,"logprobs":true,"top_logprobs":20})"), lim).top_logprobs, 20);
  auto completion = [&](const std::string& extra) {
    return parse_completion_request(Json::parse(R"({"model":"tiny","prompt":"x")" + extra + "}"), lim).top_logprobs;
  };
  EXPECT_EQ(completion(""), -1);
  EXPECT_EQ(completion(R"(,"logprobs":null)"), -1);
  EXPECT_EQ(completion(R"(,"logprobs":0)"), 0);
  EXPECT_EQ(completion(R"(,"logprobs":5)"), 5);
  for (const char* bad : {R"(,"logprobs":21)", R"(,"logprobs":-1)", R"(,"logprobs":true)"}) {
    try {
      completion(bad);
      ADD_FAILURE() << bad;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param, "logprobs") << bad;
    }
  }
}

TEST(ServeRequest, CompletionFields) {
  auto r = parse_completion_request(
      parse_body(R"({"model":"tiny","prompt":"abc","max_tokens":3,"echo":false,"best_of":1,"suffix":"","stop":"x"})"),
      limits());
  EXPECT_EQ(r.prompt, "abc");
  EXPECT_EQ(r.max_tokens, 3);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(completion_error(R"({"model":"tiny","prompt":"abc","echo":true})").param, "echo");
  EXPECT_EQ(completion_error(R"({"model":"tiny","prompt":"abc","messages":[]})").code, "unknown_parameter");
  EXPECT_EQ(completion_error(R"({"model":"tiny","prompt":[1,2,3]})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"model":"tiny","prompt":""})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"model":"tiny"})").code, "missing_required_parameter");
  EXPECT_EQ(completion_error(R"({"model":"tiny","prompt":"a","max_completion_tokens":3})").code, "unknown_parameter");
}

TEST(ServeRequest, MalformedBodies) {
  for (std::string body : {"", "{", "[1,2]", "\"text\"", "{\"model\":\"tiny\",}", "nul"}) {
    try {
      parse_body(body);
      ADD_FAILURE() << "parsed: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.code, "invalid_json");
    }
  }
  // Nesting beyond the JSON depth limit anywhere in the body is refused at parse, naming the limit
  // (these used to overflow the stack in recursive dumps: ~60 KB bodies).
  auto deep = [](size_t n) { return std::string(n, '[') + std::string(n, ']'); };
  std::string deep_tools = R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function",)"
                           R"("function":{"name":"f","parameters":{"type":"object","properties":{"a":)" +
                           deep(30000) + "}}}}]}";
  std::string deep_schema = R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"response_format":)"
                            R"({"type":"json_schema","json_schema":{"name":"s",)"
                            R"("schema":{"type":"object","properties":{"a":)" +
                            deep(50000) + "}}}}}";
  for (const std::string& body : {deep_tools, deep_schema}) {
    ApiError e = chat_error(body);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "invalid_json");
    EXPECT_NE(e.message.find("deeper than this server's limit of 256 levels"), std::string::npos) << e.message;
  }
  Json err = error_body(ApiError(429, "busy", "rate_limit_error", "", "rate_limit_exceeded"));
  EXPECT_EQ(err.dump(), R"({"error":{"message":"busy","type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"}})");
}

}  // namespace
}  // namespace sluice::serve
