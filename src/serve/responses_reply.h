// OpenAI Responses API response shapes: the `response` object (output items: a `reasoning` item
// with reasoning_text content when the model reasoned, a `message` item with output_text, one
// `function_call` item per tool call; status completed, or incomplete with reason
// max_output_tokens; usage with the cached input tokens) and its stream of named events
// (response.created, response.in_progress, response.output_item.added / content_part.added /
// reasoning_text.delta or output_text.delta / *.done / output_item.done per item,
// function_call_arguments.delta / .done per call, then response.completed or response.incomplete;
// every event numbered by sequence_number), as the official SDK's stream accumulator reads them.
#pragma once
#include <memory>

#include "serve/reply_writer.h"

namespace sluice::serve {

// `echo`: the request's settings the response object repeats (ResponsesRequest::echo).
std::unique_ptr<ReplyWriter> make_responses_writer(ReplyContext ctx, Json echo, ReplyWriter::Send send);

}  // namespace sluice::serve
