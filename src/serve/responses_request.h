// POST /v1/responses (OpenAI's Responses API) requests: validated field by field with the API's
// own names (unknown or unsupported fields are a 400, as on the other routes), then mapped onto a
// chat request, so one path renders, guides and runs every API:
//   instructions               -> a system message first
//   input (text or items)      -> messages: message items (input_text / output_text parts),
//                                 function_call items -> the assistant's tool_calls,
//                                 function_call_output -> tool messages, reasoning items -> the next
//                                 assistant message's reasoning_content
//   tools [{type: function, name, description, parameters, strict}] -> chat tools
//   tool_choice, parallel_tool_calls, reasoning.effort, text.format (json_object / json_schema),
//   max_output_tokens, temperature, top_p, stream -> the chat fields of the same meaning.
// Nothing is stored: store is accepted (the API's default is true) and the response says false;
// previous_response_id, background and include are refused.
#pragma once
#include "serve/openai_request.h"

namespace sluice::serve {

struct ResponsesRequest {
  ChatRequest chat;
  // What the response object repeats of the request (instructions, max_output_tokens, metadata,
  // parallel_tool_calls, reasoning, temperature, text, tool_choice, tools, top_p, truncation).
  Json echo = Json::object();
};

ResponsesRequest parse_responses_request(const Json& body, const RequestLimits& limits);

}  // namespace sluice::serve
