// Guided replies in a model's chat format: the grammar of everything the model writes after the
// generation prompt, when its content must follow a grammar (response_format json_object or
// json_schema) or it must call tools. The format's own structure around the content (K3's closing
// tags, Qwen3's lines after </think>, gpt-oss's final channel) is part of the grammar, so the
// reply parser sees a well-formed reply; a reasoning block before it stays free
// (GrammarConstraint's starts_after: the token that ends it; gpt-oss's analysis messages are free
// text inside the grammar, as no one token ends them). Every chat format has a guided form.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "guide/grammar.h"
#include "tokenizer/chat.h"

namespace sluice::runtime {

struct GuidedReply {
  std::shared_ptr<const guide::Grammar> grammar;
  int32_t starts_after = -1;  // the token that ends the free reasoning block, or -1 (none)
};

// `content_gbnf`: GBNF rules whose start rule is `content-root` (json_schema_gbnf(schema,
// "content-")). `thinking`: the request asked for reasoning (ChatOptions::thinking). Throws
// sluice::Error for a format without a guided form.
GuidedReply guided_reply(const tokenizer::Tokenizer& tokenizer, tokenizer::ChatFormat format, bool thinking,
                         const std::string& content_gbnf);

// A tool call the reply must make (tool_choice required / any / a named function): one tool's
// name and its parameters' JSON Schema.
struct GuidedTool {
  std::string name;
  nlohmann::ordered_json parameters;  // null: any object
};

// The grammar of a reply that is one or more calls of `tools` (any of them, each with arguments
// valid against its schema) in the format's own tool-call syntax and nothing else after the
// reasoning: K3's tools block (each call's arguments as one <|open|>json type="object"<|sep|>
// block, which K3's parser reads as the arguments), Qwen3's <tool_call> lines, Kimi K2's tool-call
// section (ids functions.NAME:INDEX), DeepSeek-V3's calls with json fences, gpt-oss's one call on
// the commentary channel. Throws sluice::Error for a schema the grammar cannot enforce.
// `parallel`: one or more calls (OpenAI's parallel_tool_calls, the default), else exactly one
// (gpt-oss: always one, as it makes one call per turn).
GuidedReply guided_tool_calls(const tokenizer::Tokenizer& tokenizer, tokenizer::ChatFormat format, bool thinking,
                              const std::vector<GuidedTool>& tools, bool parallel = true);

}  // namespace sluice::runtime
