// Anthropic Messages request validation and its mapping onto OpenAI-shaped chat messages (see
// anthropic_request.h). Field paths in messages follow Anthropic's style: messages.0.content.1.
#include "serve/anthropic_request.h"

#include <set>

#include "serve/chat_options.h"
#include "serve/json_fields.h"

namespace sluice::serve {
namespace {

using tokenizer::ChatFormat;

const std::set<std::string> kFields = {"model",       "messages",      "max_tokens", "system",   "metadata",
                                       "stop_sequences", "stream",     "temperature", "top_p",   "top_k",
                                       "tools",       "tool_choice",   "thinking",   "service_tier", "cache_control"};
// Requests may carry at most this many stop sequences (each is matched against all generated text).
constexpr size_t kMaxStopSequences = 16;

[[noreturn]] void bad(const std::string& path, const std::string& what, const std::string& code = "invalid_value") {
  invalid(path, path + ": " + what, code);
}
[[noreturn]] void wrong_type(const std::string& path, const Json& v, const std::string& want) {
  bad(path, "expected " + want + ", got " + json_type_name(v) + ".", "invalid_type");
}
[[noreturn]] void unknown_field(const std::string& path) { bad(path, "Extra inputs are not permitted.", "unknown_parameter"); }
[[noreturn]] void unsupported(const std::string& path, const std::string& what) { bad(path, what, "unsupported_value"); }

std::string at(const std::string& path, size_t i) { return path + "." + std::to_string(i); }
std::string at(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

// Present and not null.
const Json* field(const Json& obj, const std::string& key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

void only_fields(const Json& obj, const std::string& path, const std::set<std::string>& allowed) {
  for (auto f = obj.begin(); f != obj.end(); ++f)
    if (!allowed.count(f.key())) unknown_field(at(path, f.key()));
}

const std::string& string_field(const Json& obj, const std::string& path, const std::string& key) {
  const Json* v = field(obj, key);
  if (!v) bad(at(path, key), "Field required.", "missing_required_parameter");
  if (!v->is_string()) wrong_type(at(path, key), *v, "a string");
  return v->get_ref<const std::string&>();
}

// A block's "type".
std::string block_type(const Json& block, const std::string& path) {
  if (!block.is_object()) wrong_type(path, block, "an object (a content block)");
  return string_field(block, path, "type");
}

// cache_control is a prompt-caching hint: the server keeps conversation state on its own, so the
// hint changes nothing here; its shape is still checked.
void check_cache_control(const Json& obj, const std::string& path) {
  const Json* cc = field(obj, "cache_control");
  if (!cc) return;
  const std::string p = at(path, "cache_control");
  if (!cc->is_object()) wrong_type(p, *cc, "an object");
  only_fields(*cc, p, {"type", "ttl"});
  if (string_field(*cc, p, "type") != "ephemeral") unsupported(at(p, "type"), "the only cache type is 'ephemeral'.");
  if (const Json* ttl = field(*cc, "ttl"); ttl && !ttl->is_string()) wrong_type(at(p, "ttl"), *ttl, "a string");
}

// A text block {type: "text", text, cache_control?, citations?}: its text.
std::string text_block(const Json& block, const std::string& path) {
  only_fields(block, path, {"type", "text", "cache_control", "citations"});
  check_cache_control(block, path);
  if (const Json* c = field(block, "citations"); c && !(c->is_array() && c->empty()))
    unsupported(at(path, "citations"), "citations are not supported.");
  return string_field(block, path, "text");
}

[[noreturn]] void unsupported_block(const std::string& path, const std::string& type, const std::string& allowed) {
  unsupported(at(path, "type"), "content blocks of type '" + type + "' are not supported here (this server takes " +
                                    allowed + ").");
}

// Text given as a string or as text blocks (system prompts, tool results).
std::string text_of(const Json& v, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) wrong_type(path, v, "a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = at(path, i);
    std::string type = block_type(v[i], p);
    if (type != "text") unsupported_block(p, type, "text blocks");
    text += text_block(v[i], p);
  }
  return text;
}

// One user turn: runs of text become user messages, each tool_result a tool message, in order.
void user_turn(const Json& content, const std::string& path, Json& out) {
  if (content.is_string()) {
    out.push_back(Json{{"role", "user"}, {"content", content}});
    return;
  }
  if (!content.is_array()) wrong_type(path, content, "a string or an array of content blocks");
  if (content.empty()) bad(path, "a message needs at least one content block.");
  std::string text;
  bool have_text = false;
  auto flush_text = [&] {
    if (have_text) out.push_back(Json{{"role", "user"}, {"content", text}});
    text.clear();
    have_text = false;
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = at(path, i);
    std::string type = block_type(content[i], p);
    if (type == "text") {
      text += text_block(content[i], p);
      have_text = true;
    } else if (type == "tool_result") {
      const Json& b = content[i];
      only_fields(b, p, {"type", "tool_use_id", "content", "is_error", "cache_control"});
      check_cache_control(b, p);
      Json tool = {{"role", "tool"}, {"tool_call_id", string_field(b, p, "tool_use_id")}};
      // is_error has no place in any chat template; the result's text is what the model sees.
      if (const Json* e = field(b, "is_error"); e && !e->is_boolean()) wrong_type(at(p, "is_error"), *e, "a boolean");
      const Json* c = field(b, "content");
      tool["content"] = c ? text_of(*c, at(p, "content")) : std::string();
      flush_text();
      out.push_back(std::move(tool));
    } else {
      unsupported_block(p, type, "text and tool_result blocks in user messages");
    }
  }
  flush_text();
}

// One assistant turn: thinking blocks become reasoning_content, text blocks content, tool_use
// blocks tool_calls (with their input object as the arguments).
void assistant_turn(const Json& content, const std::string& path, Json& out) {
  Json msg = {{"role", "assistant"}, {"content", nullptr}};
  if (content.is_string()) {
    msg["content"] = content;
    out.push_back(std::move(msg));
    return;
  }
  if (!content.is_array()) wrong_type(path, content, "a string or an array of content blocks");
  std::string text, reasoning;
  bool have_text = false, have_reasoning = false;
  Json calls = Json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = at(path, i);
    const Json& b = content[i];
    std::string type = block_type(b, p);
    if (type == "text") {
      text += text_block(b, p);
      have_text = true;
    } else if (type == "thinking") {
      only_fields(b, p, {"type", "thinking", "signature", "cache_control"});
      check_cache_control(b, p);
      reasoning += string_field(b, p, "thinking");
      have_reasoning = true;
      if (const Json* sig = field(b, "signature"); sig && !sig->is_string()) wrong_type(at(p, "signature"), *sig, "a string");
    } else if (type == "tool_use") {
      only_fields(b, p, {"type", "id", "name", "input", "cache_control"});
      check_cache_control(b, p);
      const std::string& id = string_field(b, p, "id");
      const std::string& name = string_field(b, p, "name");
      if (name.empty()) bad(at(p, "name"), "a tool_use block needs a non-empty name.");
      const Json* input = field(b, "input");
      if (!input) bad(at(p, "input"), "Field required.", "missing_required_parameter");
      if (!input->is_object()) wrong_type(at(p, "input"), *input, "an object");
      calls.push_back(Json{{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", *input}}}});
    } else {
      unsupported_block(p, type, "text, thinking and tool_use blocks in assistant messages");
    }
  }
  // Content is null only beside tool calls, as an OpenAI assistant message has it.
  if (have_text || calls.empty()) msg["content"] = text;
  if (have_reasoning) msg["reasoning_content"] = reasoning;
  if (!calls.empty()) msg["tool_calls"] = std::move(calls);
  out.push_back(std::move(msg));
}

Json convert_messages(const Json& messages) {
  if (!messages.is_array()) wrong_type("messages", messages, "an array");
  if (messages.empty()) bad("messages", "at least one message is required.");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string p = at("messages", i);
    const Json& m = messages[i];
    if (!m.is_object()) wrong_type(p, m, "an object");
    only_fields(m, p, {"role", "content"});
    const std::string& role = string_field(m, p, "role");
    const Json* content = field(m, "content");
    if (!content) bad(at(p, "content"), "Field required.", "missing_required_parameter");
    if (role == "user") {
      user_turn(*content, at(p, "content"), out);
    } else if (role == "assistant") {
      // A last assistant message asks the model to continue it (a prefill); the chat renderers
      // close every message they are given, so that cannot be expressed.
      if (i + 1 == messages.size())
        unsupported(p, "a final assistant message (prefilling the reply) is not supported; end with a user message.");
      assistant_turn(*content, at(p, "content"), out);
    } else {
      bad(at(p, "role"), "'" + role + "' is not a role (user or assistant; the system prompt is the 'system' field).");
    }
  }
  return out;
}

Json convert_tools(const Json& tools) {
  if (!tools.is_array()) wrong_type("tools", tools, "an array");
  if (tools.empty()) return nullptr;
  Json out = Json::array();
  std::set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = at("tools", i);
    const Json& t = tools[i];
    if (!t.is_object()) wrong_type(p, t, "an object");
    if (const Json* type = field(t, "type"); type && !(type->is_string() && *type == "custom"))
      unsupported(at(p, "type"), "only client tools (type 'custom', or no type) are supported; server tools are not.");
    only_fields(t, p, {"type", "name", "description", "input_schema", "cache_control"});
    check_cache_control(t, p);
    const std::string& name = string_field(t, p, "name");
    if (name.empty()) bad(at(p, "name"), "a tool needs a non-empty name.");
    if (!names.insert(name).second) bad(at(p, "name"), "tool names must be unique ('" + name + "' repeats).");
    const Json* schema = field(t, "input_schema");
    if (!schema) bad(at(p, "input_schema"), "Field required.", "missing_required_parameter");
    if (!schema->is_object()) wrong_type(at(p, "input_schema"), *schema, "an object (a JSON schema)");
    Json fn = {{"name", name}};
    if (const Json* d = field(t, "description")) {
      if (!d->is_string()) wrong_type(at(p, "description"), *d, "a string");
      fn["description"] = *d;
    }
    fn["parameters"] = *schema;
    out.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// {"type": "auto"|"any"|"none"|"tool", "name"?, "disable_parallel_tool_use"?} -> OpenAI's
// auto / required / none, the named tool ("tool") and whether several calls may be made.
void convert_tool_choice(const Json& tc, ChatRequest& c) {
  if (!tc.is_object()) wrong_type("tool_choice", tc, "an object");
  const std::string& type = string_field(tc, "tool_choice", "type");
  if (type != "auto" && type != "any" && type != "none" && type != "tool")
    bad("tool_choice.type", "'" + type + "' is not a tool choice (auto, any, tool or none).");
  only_fields(tc, "tool_choice",
              type == "none"   ? std::set<std::string>{"type"}
              : type == "tool" ? std::set<std::string>{"type", "name", "disable_parallel_tool_use"}
                               : std::set<std::string>{"type", "disable_parallel_tool_use"});
  if (const Json* d = field(tc, "disable_parallel_tool_use")) {
    if (!d->is_boolean()) wrong_type("tool_choice.disable_parallel_tool_use", *d, "a boolean");
    c.parallel_tool_calls = !d->get<bool>();
  }
  if ((type == "any" || type == "tool") && c.tools.is_null()) bad("tool_choice", "tool_choice '" + type + "' needs tools.");
  if (type == "tool") {
    const std::string& name = string_field(tc, "tool_choice", "name");
    bool known = false;
    for (const Json& t : c.tools) known = known || t["function"]["name"] == name;
    if (!known) bad("tool_choice.name", "'" + name + "' is not among the tools.");
    c.tool_name = name;
  }
  c.tool_choice = type == "any" || type == "tool" ? "required" : type;
}

MessagesRequest::Thinking convert_thinking(const Json& th, int64_t max_tokens) {
  if (!th.is_object()) wrong_type("thinking", th, "an object");
  const std::string& type = string_field(th, "thinking", "type");
  if (type == "disabled") {
    only_fields(th, "thinking", {"type"});
    return MessagesRequest::Thinking::disabled;
  }
  if (type != "enabled" && type != "adaptive")
    bad("thinking.type", "'" + type + "' is not a thinking mode here (enabled, adaptive or disabled).");
  only_fields(th, "thinking", type == "adaptive" ? std::set<std::string>{"type", "display"}
                                                 : std::set<std::string>{"type", "budget_tokens", "display"});
  // Reasoning is always shown as the model wrote it.
  if (const Json* d = field(th, "display"); d && *d != "summarized")
    unsupported("thinking.display", "only 'summarized' (the reasoning as written) is supported.");
  if (type == "adaptive") return MessagesRequest::Thinking::enabled;
  // The budget is checked as Anthropic checks it; the reply's length is bounded by max_tokens
  // only (reasoning and answer together), as this server cannot end a model's reasoning early.
  const Json* b = field(th, "budget_tokens");
  if (!b) bad("thinking.budget_tokens", "Field required.", "missing_required_parameter");
  if (!json_is_integer(*b)) wrong_type("thinking.budget_tokens", *b, "an integer");
  const int64_t budget = json_as_int(*b);
  if (budget < 1024) bad("thinking.budget_tokens", "must be at least 1024.");
  if (budget >= max_tokens) bad("thinking.budget_tokens", "must be less than max_tokens.");
  return MessagesRequest::Thinking::enabled;
}

double number_in(const Json& body, const std::string& key, double lo, double hi, double dflt) {
  const Json* v = field(body, key);
  if (!v) return dflt;
  if (!v->is_number()) wrong_type(key, *v, "a number");
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) bad(key, "must be between " + Json(lo).dump() + " and " + Json(hi).dump() + ".");
  return x;
}

}  // namespace

MessagesRequest parse_messages_request(const Json& body, const RequestLimits& limits) {
  MessagesRequest r;
  ChatRequest& c = r.chat;
  for (auto f = body.begin(); f != body.end(); ++f)
    if (!kFields.count(f.key())) unknown_field(f.key());
  check_cache_control(body, "");
  const Json* model = field(body, "model");
  if (!model) bad("model", "Field required.", "missing_required_parameter");
  if (!model->is_string()) wrong_type("model", *model, "a string");
  if (model->get<std::string>() != limits.model_id)
    throw ApiError(404, "model: '" + model->get<std::string>() + "' does not exist; this server serves '" +
                            limits.model_id + "'.",
                   "not_found_error", "model", "model_not_found");

  const Json* max_tokens = field(body, "max_tokens");
  if (!max_tokens) bad("max_tokens", "Field required.", "missing_required_parameter");
  if (!json_is_integer(*max_tokens)) wrong_type("max_tokens", *max_tokens, "an integer");
  c.max_tokens = json_as_int(*max_tokens);
  if (c.max_tokens < 1) bad("max_tokens", "must be at least 1.");

  const Json* messages = field(body, "messages");
  if (!messages) bad("messages", "Field required.", "missing_required_parameter");
  Json converted = convert_messages(*messages);
  c.messages = Json::array();
  if (const Json* system = field(body, "system")) {
    std::string text = text_of(*system, "system");
    if (!text.empty()) c.messages.push_back(Json{{"role", "system"}, {"content", std::move(text)}});
  }
  for (auto& m : converted) c.messages.push_back(std::move(m));

  if (const Json* md = field(body, "metadata")) {
    if (!md->is_object()) wrong_type("metadata", *md, "an object");
    only_fields(*md, "metadata", {"user_id"});
    if (const Json* u = field(*md, "user_id"); u && !u->is_string()) wrong_type("metadata.user_id", *u, "a string");
  }
  if (const Json* st = field(body, "service_tier"); st && !(st->is_string() && (*st == "auto" || *st == "standard_only")))
    bad("service_tier", "must be 'auto' or 'standard_only'.");
  if (const Json* stops = field(body, "stop_sequences")) {
    if (!stops->is_array()) wrong_type("stop_sequences", *stops, "an array of strings");
    if (stops->size() > kMaxStopSequences)
      bad("stop_sequences", "at most " + std::to_string(kMaxStopSequences) + " stop sequences are supported.");
    for (size_t i = 0; i < stops->size(); ++i) {
      const Json& s = (*stops)[i];
      if (!s.is_string()) wrong_type(at("stop_sequences", i), s, "a string");
      if (s.get_ref<const std::string&>().empty()) bad(at("stop_sequences", i), "stop sequences must not be empty.");
      c.stop.push_back(s.get<std::string>());
    }
  }
  if (const Json* s = field(body, "stream")) {
    if (!s->is_boolean()) wrong_type("stream", *s, "a boolean");
    c.stream = s->get<bool>();
  }
  // Anthropic's default temperature is 1.0; 0 is greedy here, as top_p 0 is.
  c.sampling.temperature = number_in(body, "temperature", 0.0, 1.0, 1.0);
  c.sampling.top_p = number_in(body, "top_p", 0.0, 1.0, 1.0);
  if (c.sampling.top_p == 0.0) {
    c.sampling.temperature = 0.0;
    c.sampling.top_p = 1.0;
  }
  if (const Json* k = field(body, "top_k")) {
    if (!json_is_integer(*k)) wrong_type("top_k", *k, "an integer");
    if (json_as_int(*k) < 0) bad("top_k", "must be at least 0 (0: no limit).");
    c.sampling.top_k = json_as_int(*k);
  }
  if (const Json* tools = field(body, "tools")) c.tools = convert_tools(*tools);
  if (const Json* tc = field(body, "tool_choice")) {
    convert_tool_choice(*tc, c);
    if (c.tool_choice == "auto") c.tool_choice.clear();
  }
  if (const Json* th = field(body, "thinking")) r.thinking = convert_thinking(*th, c.max_tokens);
  return r;
}

MessagesRequest parse_count_tokens_request(const Json& body, const RequestLimits& limits) {
  if (!body.is_object()) bad("body", "must be a JSON object.");
  static const std::set<std::string> kCountFields = {"model", "messages", "system", "tools", "tool_choice", "thinking"};
  for (auto f = body.begin(); f != body.end(); ++f)
    if (!kCountFields.count(f.key())) unknown_field(f.key());
  // No reply is made: any max_tokens lets every thinking budget through.
  Json with_length = body;
  with_length["max_tokens"] = int64_t(1) << 40;
  return parse_messages_request(with_length, limits);
}

tokenizer::ChatOptions messages_chat_options(ChatFormat format, const MessagesRequest& r) {
  ChatRequest c = r.chat;
  using T = MessagesRequest::Thinking;
  auto refuse = [](const std::string& what) { unsupported("thinking", what); };
  switch (format) {
    case ChatFormat::kimi_k3:
    case ChatFormat::qwen3:
      // Thinking happens only when asked for, as in Anthropic's API (a request without `thinking`
      // gets the answer alone).
      if (r.thinking != T::enabled) c.reasoning_effort = "none";
      break;
    case ChatFormat::gpt_oss:
      if (r.thinking == T::disabled) refuse("gpt-oss always reasons; leave 'thinking' out or enable it.");
      break;
    case ChatFormat::kimi_k2_thinking:
      if (r.thinking == T::disabled) refuse("Kimi-K2-Thinking always thinks; leave 'thinking' out or enable it.");
      break;
    case ChatFormat::deepseek_v3:
    case ChatFormat::deepseek_v3_0324:
    case ChatFormat::kimi_k2:
      if (r.thinking == T::enabled)
        refuse(std::string(format == ChatFormat::kimi_k2 ? "Kimi-K2-Instruct" : "DeepSeek-V3") +
               " does not reason; leave 'thinking' out or disable it.");
      break;
  }
  try {
    return chat_options_for(format, c);
  } catch (const ApiError& e) {
    if (e.param == "tool_choice")
      unsupported("tool_choice", "this model's chat format cannot forbid tool use; give type 'auto', 'any' or 'tool', "
                                 "or leave tool_choice out.");
    throw;
  }
}

}  // namespace sluice::serve
