// From a validated OpenAI chat request to the options of the model's chat format: what each format
// can express (thinking on/off, K3's thinking effort, tool choice and response format, gpt-oss's
// reasoning effort) is passed on, and what it cannot is refused by field name (ApiError 400), never
// silently ignored.
#pragma once
#include "serve/openai_request.h"
#include "tokenizer/chat.h"

namespace sluice::serve {

tokenizer::ChatOptions chat_options_for(tokenizer::ChatFormat format, const ChatRequest& request);

}  // namespace sluice::serve
