// Validation of OpenAI-shaped request bodies for /v1/completions and /v1/chat/completions: every
// field is checked against what the server supports, and anything unknown or unsupported becomes
// an OpenAI-shaped 400 error (ApiError) before any inference runs.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/sampling.h"

namespace sluice::serve {

using Json = nlohmann::ordered_json;

// An error answered as {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError : std::exception {
  ApiError(int status, std::string message, std::string type, std::string param = {}, std::string code = {})
      : status(status), message(std::move(message)), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}
  const char* what() const noexcept override { return message.c_str(); }
  int status;
  std::string message, type, param, code;  // empty param/code are sent as null
};

// 400 invalid_request_error naming the field (param) that was wrong.
[[noreturn]] void invalid(const std::string& param, const std::string& message, const std::string& code = {});
// The 400s of the OpenAI routes by their codes: a wrong JSON type ("expected `want`"), a field
// this server does not know, a value it does not support (`message` says what it does).
[[noreturn]] void invalid_type(const std::string& param, const Json& v, const std::string& want);
[[noreturn]] void unknown_parameter(const std::string& param);
[[noreturn]] void unsupported_value(const std::string& param, const std::string& message);
// unknown_parameter("<where>.<key>") for the first key of `obj` not in `allowed`.
void only_keys(const Json& obj, const std::string& where, std::initializer_list<const char*> allowed);

Json error_body(const ApiError& e);

// What the server was started with (the limits every request is clamped to).
struct RequestLimits {
  std::string model_id;
  int64_t max_tokens = 1'000'000;         // --max-tokens: hard cap on generated tokens
  int64_t default_completion_tokens = 256;  // completions without max_tokens
};

// Fields both endpoints share, after validation.
struct CommonRequest {
  int64_t max_tokens = 0;  // requested (0 = not given); the server clamps it to limits and context
  bool stream = false;
  bool include_usage = false;
  runtime::SamplingParams sampling;  // temperature 0 = greedy
  bool seed_given = false;
  std::vector<std::string> stop;
  bool ignore_eos = false;  // extension (as in vLLM): generate past the end-of-sequence token
  // Log-probabilities of the generated tokens (completions: logprobs N; chat: logprobs true with
  // top_logprobs N): -1 none, else N alternatives per token (0..20).
  int top_logprobs = -1;
};

struct CompletionRequest : CommonRequest {
  std::string prompt;
};

struct ChatRequest : CommonRequest {
  Json messages = Json::array();  // validated, "developer" mapped to "system", text parts joined
  Json tools = nullptr;           // validated array or null
  std::string reasoning_effort;   // "" (not given), low, medium, high, max, or none (thinking off)
  std::string tool_choice;        // "", auto, none, required
  std::string tool_name;          // required: only this tool (OpenAI's named function, Anthropic's "tool")
  bool parallel_tool_calls = true;  // required: one or more calls (false: exactly one)
  Json response_format = nullptr; // null (text) or json_object / json_schema
};

// Parse + validate; throw ApiError. `body` is the raw request body.
Json parse_body(const std::string& body);
CompletionRequest parse_completion_request(Json body, const RequestLimits& limits);
ChatRequest parse_chat_request(const Json& body, const RequestLimits& limits);

}  // namespace sluice::serve
