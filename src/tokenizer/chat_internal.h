// Helpers shared by the chat renderers and parsers (not part of the public API): Python-flavoured
// JSON printing and truthiness, deep key sorting, and segment encoding.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/chat.h"

namespace sluice::tokenizer::chat_detail {

// Jinja / Python truthiness of a JSON value (null, false, 0, "", [], {} are false).
bool truthy(const ChatJson& v);
// Python str(value) for scalars (None, True, False, numbers); JSON text for arrays and objects.
std::string python_str(const ChatJson& v);
// Copy with every object's keys sorted (recursively).
ChatJson deep_sort(const ChatJson& v);
// Text of a message "content": string, null ("") or an array of {"type":"text","text":...} parts.
std::string content_text(const ChatJson& content, const std::string& where);
// The special token id for a spelling, or an error naming the format that needs it.
int32_t require_special(const Tokenizer& tok, const std::string& spelling, const char* format);
// Encodes segments: special ones as their single id, ordinary ones separately with encode_into;
// stops (too_long) once there are more than max_ids ids.
RenderedChat encode_segments(const Tokenizer& tok, std::vector<ChatSegment> segments, const char* format,
                             size_t max_ids);

RenderedChat render_k3(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& options);
RenderedChat render_qwen3(const Tokenizer& tok, const ChatJson& messages, const ChatOptions& options);

}  // namespace sluice::tokenizer::chat_detail
