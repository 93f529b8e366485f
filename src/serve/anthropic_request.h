// Validation of Anthropic Messages request bodies (POST /v1/messages) and their mapping onto the
// chat path the OpenAI route already has: the system prompt (a string or text blocks) becomes a
// system message, text / thinking / tool_use blocks of an assistant turn become content,
// reasoning_content and tool_calls, tool_result blocks of a user turn become tool messages, tools
// become function tools, tool_choice auto|none|any becomes auto|none|required and `thinking` turns
// the format's reasoning on or off. Every field is checked; anything unknown or unsupported is a
// 400 (ApiError, whose message starts with the field's path, "messages.0.content.1.type: ...")
// before any inference runs.
#pragma once
#include "serve/openai_request.h"
#include "tokenizer/chat.h"

namespace sluice::serve {

struct MessagesRequest {
  // OpenAI-shaped messages and tools, tool_choice, the common fields (max_tokens, stream,
  // sampling, stop sequences); reasoning_effort is left to messages_chat_options.
  ChatRequest chat;
  enum class Thinking { unset, enabled, disabled };
  Thinking thinking = Thinking::unset;
};

// Parse + validate a parsed body (parse_body); throws ApiError.
MessagesRequest parse_messages_request(const Json& body, const RequestLimits& limits);
// The body of POST /v1/messages/count_tokens (model, messages, system, tools, tool_choice,
// thinking; no max_tokens, no sampling), as the Messages request it would render.
MessagesRequest parse_count_tokens_request(const Json& body, const RequestLimits& limits);

// The chat format's options for the request: `thinking` as the format can express it (refused by
// name where it cannot: a model that never reasons, or one that always does), then what
// chat_options_for derives (tool_choice none/any only where the format has that control).
tokenizer::ChatOptions messages_chat_options(tokenizer::ChatFormat format, const MessagesRequest& request);

}  // namespace sluice::serve
