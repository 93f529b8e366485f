// Anthropic Messages response shapes: the `message` object (content blocks of type thinking, text
// and tool_use; stop_reason end_turn | max_tokens | stop_sequence | tool_use; usage with the
// prompt tokens continued from kept state as cache_read_input_tokens) and its stream of named
// server-sent events (message_start, ping, content_block_start / content_block_delta with
// thinking_delta (then one signature_delta), text_delta or input_json_delta / content_block_stop,
// message_delta with the stop
// reason and cumulative usage, message_stop), plus Anthropic-shaped errors.
#pragma once
#include <memory>
#include <string>

#include "serve/reply_writer.h"

namespace sluice::serve {

std::unique_ptr<ReplyWriter> make_anthropic_writer(ReplyContext ctx, ReplyWriter::Send send);

// {"type": "error", "error": {"type", "message"}}, the type from the status: 400 (and other 4xx)
// invalid_request_error, 401 authentication_error, 403 permission_error, 404 not_found_error,
// 413 request_too_large, 429 rate_limit_error, 529 overloaded_error, other 5xx api_error.
Json anthropic_error_body(const ApiError& e);

// A thinking block's signature: "sluice-sha256:" and the SHA-256 of its text. It says which text the
// server wrote (a client passes the block back unchanged); it is not a secret, and the block's text
// is what the model reads again either way.
std::string thinking_signature(const std::string& thinking);

// A tool call's arguments (JSON text) as a tool_use input object: the object they spell, {} when
// empty, else {"arguments_text": the text} (a model may write arguments that are not a JSON object).
Json tool_use_input(const std::string& arguments);

}  // namespace sluice::serve
