// Responses API requests mapped onto chat requests (see responses_request.h).
#include "serve/responses_request.h"

#include <set>
#include <utility>

namespace sluice::serve {
namespace {

const std::set<std::string> kFields = {
    "model",       "input",        "instructions", "max_output_tokens", "temperature",        "top_p",
    "stream",      "tools",        "tool_choice",  "parallel_tool_calls", "reasoning",        "text",
    "store",       "metadata",     "user",         "previous_response_id", "include",         "truncation",
    "background",  "service_tier", "prompt_cache_key", "safety_identifier", "max_tool_calls", "top_logprobs",
    "stream_options"};

const Json* field(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}
std::string string_field(const Json& obj, const char* key, const std::string& param) {
  const Json* v = field(obj, key);
  if (!v) invalid(param, "'" + param + "' is required.", "missing_required_parameter");
  if (!v->is_string()) invalid_type(param, *v, "a string");
  return v->get<std::string>();
}

// A message item's content: a string, or input_text / output_text parts joined.
std::string item_text(const Json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) invalid_type(param, content, "a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    const Json& part = content[i];
    if (!part.is_object()) invalid_type(p, part, "an object");
    const std::string type = string_field(part, "type", p + ".type");
    if (type != "input_text" && type != "output_text" && type != "text")
      unsupported_value(p + ".type", "Unsupported content part type '" + type + "': this server accepts text only.");
    only_keys(part, p, {"type", "text", "annotations", "logprobs"});
    text += string_field(part, "text", p + ".text");
  }
  return text;
}

// input -> chat messages (after the instructions' system message).
void map_input(const Json& input, Json& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array()) invalid_type("input", input, "a string or an array of input items");
  std::string reasoning;  // a reasoning item's text, for the assistant turn that follows it
  // The assistant message that function_call items join (the one just before them, if any).
  auto assistant = [&]() -> Json& {
    if (messages.empty() || messages.back()["role"] != "assistant") {
      messages.push_back({{"role", "assistant"}, {"content", nullptr}});
      if (!reasoning.empty()) messages.back()["reasoning_content"] = std::exchange(reasoning, {});
    }
    return messages.back();
  };
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string p = "input[" + std::to_string(i) + "]";
    const Json& item = input[i];
    if (!item.is_object()) invalid_type(p, item, "an object");
    const Json* type_v = field(item, "type");
    if (type_v && !type_v->is_string()) invalid_type(p + ".type", *type_v, "a string");
    const std::string type = type_v ? type_v->get<std::string>() : "message";
    if (type == "message") {
      only_keys(item, p, {"type", "role", "content", "id", "status"});
      const std::string role = string_field(item, "role", p + ".role");
      if (role != "user" && role != "system" && role != "developer" && role != "assistant")
        invalid(p + ".role", "Invalid value for '" + p + ".role': '" + role +
                                 "' (supported: user, system, developer, assistant).",
                "invalid_value");
      const Json* content = field(item, "content");
      if (!content) invalid(p + ".content", "A message item needs 'content'.", "missing_required_parameter");
      Json m = {{"role", role == "developer" ? "system" : role}, {"content", item_text(*content, p + ".content")}};
      if (role == "assistant" && !reasoning.empty()) m["reasoning_content"] = std::exchange(reasoning, {});
      messages.push_back(std::move(m));
    } else if (type == "function_call") {
      only_keys(item, p, {"type", "call_id", "name", "arguments", "id", "status"});
      const std::string call_id = string_field(item, "call_id", p + ".call_id");
      const std::string name = string_field(item, "name", p + ".name");
      const std::string arguments = string_field(item, "arguments", p + ".arguments");
      Json& a = assistant();
      if (!a.contains("tool_calls")) a["tool_calls"] = Json::array();
      a["tool_calls"].push_back(
          {{"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}});
    } else if (type == "function_call_output") {
      only_keys(item, p, {"type", "call_id", "output", "id", "status"});
      const std::string call_id = string_field(item, "call_id", p + ".call_id");
      const Json* output = field(item, "output");
      if (!output) invalid(p + ".output", "A function_call_output item needs 'output'.", "missing_required_parameter");
      messages.push_back({{"role", "tool"}, {"tool_call_id", call_id}, {"content", item_text(*output, p + ".output")}});
    } else if (type == "reasoning") {
      only_keys(item, p, {"type", "id", "summary", "content", "encrypted_content", "status"});
      if (field(item, "encrypted_content"))
        unsupported_value(p + ".encrypted_content", "This server neither writes nor reads encrypted reasoning.");
      // The model's own reasoning text (content), else its summary, goes back as it was.
      for (const char* key : {"content", "summary"}) {
        const Json* parts = field(item, key);
        if (!parts) continue;
        if (!parts->is_array()) invalid_type(p + "." + key, *parts, "an array");
        std::string text;
        for (size_t j = 0; j < parts->size(); ++j) {
          const std::string q = p + "." + key + "[" + std::to_string(j) + "]";
          const Json& part = (*parts)[j];
          if (!part.is_object()) invalid_type(q, part, "an object");
          only_keys(part, q, {"type", "text"});
          text += string_field(part, "text", q + ".text");
        }
        if (!text.empty()) {
          reasoning = text;
          break;
        }
      }
    } else {
      unsupported_value(p + ".type", "Unsupported input item type '" + type +
                                   "' (supported: message, function_call, function_call_output, reasoning).");
    }
  }
}

}  // namespace

ResponsesRequest parse_responses_request(const Json& body, const RequestLimits& limits) {
  for (auto it = body.begin(); it != body.end(); ++it)
    if (!kFields.count(it.key())) unknown_parameter(it.key());
  ResponsesRequest r;
  Json& echo = r.echo;
  Json chat = Json::object();
  if (const Json* m = field(body, "model")) chat["model"] = *m;
  else invalid("model", "you must provide a model parameter", "missing_required_parameter");

  Json messages = Json::array();
  const Json* instructions = field(body, "instructions");
  if (instructions) {
    if (!instructions->is_string()) invalid_type("instructions", *instructions, "a string");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  echo["instructions"] = instructions ? *instructions : Json(nullptr);
  const Json* input = field(body, "input");
  if (!input) invalid("input", "you must provide an input parameter", "missing_required_parameter");
  map_input(*input, messages);
  chat["messages"] = std::move(messages);

  for (const char* key : {"temperature", "top_p", "stream", "metadata", "user", "parallel_tool_calls"})
    if (const Json* v = field(body, key)) chat[key] = *v;
  if (const Json* v = field(body, "max_output_tokens")) chat["max_tokens"] = *v;
  echo["max_output_tokens"] = body.value("max_output_tokens", Json(nullptr));
  echo["metadata"] = body.value("metadata", Json::object());
  echo["temperature"] = body.value("temperature", Json(1.0));
  echo["top_p"] = body.value("top_p", Json(1.0));
  echo["parallel_tool_calls"] = body.value("parallel_tool_calls", Json(true));
  if (const Json* so = field(body, "stream_options")) {
    if (!so->is_object()) invalid_type("stream_options", *so, "an object");
    only_keys(*so, "stream_options", {"include_obfuscation"});  // no obfuscation is ever added
  }

  // Tools are flat here: {type: function, name, description, parameters, strict}.
  Json tools = Json::array();
  if (const Json* t = field(body, "tools")) {
    if (!t->is_array()) invalid_type("tools", *t, "an array");
    for (size_t i = 0; i < t->size(); ++i) {
      const std::string p = "tools[" + std::to_string(i) + "]";
      const Json& tool = (*t)[i];
      if (!tool.is_object()) invalid_type(p, tool, "an object");
      const std::string type = string_field(tool, "type", p + ".type");
      if (type != "function")
        unsupported_value(p + ".type", "Unsupported tool type '" + type + "': this server runs function tools only.");
      only_keys(tool, p, {"type", "name", "description", "parameters", "strict"});
      Json fn = {{"name", string_field(tool, "name", p + ".name")}};
      for (const char* key : {"description", "parameters", "strict"})
        if (const Json* v = field(tool, key)) fn[key] = *v;
      tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!tools.empty()) chat["tools"] = tools;
  }
  echo["tools"] = body.value("tools", Json::array());
  if (const Json* tc = field(body, "tool_choice")) {
    if (tc->is_object()) {  // {type: function, name}
      only_keys(*tc, "tool_choice", {"type", "name"});
      if (tc->value("type", Json()) != "function")
        unsupported_value("tool_choice.type", "A named 'tool_choice' is {\"type\": \"function\", \"name\": NAME}.");
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", string_field(*tc, "name", "tool_choice.name")}}}};
    } else {
      chat["tool_choice"] = *tc;
    }
  }
  echo["tool_choice"] = body.value("tool_choice", Json("auto"));

  echo["reasoning"] = {{"effort", nullptr}, {"summary", nullptr}};
  if (const Json* re = field(body, "reasoning")) {
    if (!re->is_object()) invalid_type("reasoning", *re, "an object");
    only_keys(*re, "reasoning", {"effort", "summary", "generate_summary"});
    if (const Json* e = field(*re, "effort")) {
      if (!e->is_string()) invalid_type("reasoning.effort", *e, "a string");
      // minimal is the API's least effort: this server's least is low (none turns thinking off).
      chat["reasoning_effort"] = *e == "minimal" ? Json("low") : *e;
      echo["reasoning"]["effort"] = *e;
    }
    for (const char* key : {"summary", "generate_summary"})
      if (const Json* s = field(*re, key); s && *s != "auto" && *s != "detailed" && *s != "concise")
        invalid(std::string("reasoning.") + key, "Invalid value for 'reasoning." + std::string(key) + "'.", "invalid_value");
  }

  echo["text"] = {{"format", {{"type", "text"}}}};
  if (const Json* text = field(body, "text")) {
    if (!text->is_object()) invalid_type("text", *text, "an object");
    only_keys(*text, "text", {"format", "verbosity"});
    if (const Json* v = field(*text, "verbosity"); v && *v != "medium")
      unsupported_value("text.verbosity", "Unsupported value for 'text.verbosity': this server supports only medium.");
    if (const Json* f = field(*text, "format")) {
      if (!f->is_object()) invalid_type("text.format", *f, "an object");
      const std::string type = string_field(*f, "type", "text.format.type");
      if (type == "json_schema") {
        only_keys(*f, "text.format", {"type", "name", "schema", "description", "strict"});
        const Json* schema = field(*f, "schema");
        if (!schema || !schema->is_object())
          invalid("text.format.schema", "A json_schema text format needs 'schema' (an object).");
        Json js = {{"schema", *schema}};
        for (const char* key : {"name", "description", "strict"})
          if (const Json* v = field(*f, key)) js[key] = *v;
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(js)}};
      } else if (type == "json_object" || type == "text") {
        only_keys(*f, "text.format", {"type"});
        chat["response_format"] = {{"type", type}};
      } else {
        invalid("text.format.type", "Invalid value for 'text.format.type': '" + type +
                                        "' (supported: text, json_object, json_schema).",
                "invalid_value");
      }
      echo["text"]["format"] = *f;
    }
  }

  if (const Json* s = field(body, "store"); s && !s->is_boolean()) invalid_type("store", *s, "a boolean");
  if (field(body, "previous_response_id"))
    unsupported_value("previous_response_id",
                "This server stores no responses: send the whole conversation as 'input' (its prefix is reused "
                "from memory, so nothing is prefilled twice).");
  if (const Json* b = field(body, "background"); b && *b != false)
    unsupported_value("background", "Unsupported value for 'background': this server answers in the foreground only.");
  if (const Json* inc = field(body, "include"); inc && !(inc->is_array() && inc->empty()))
    unsupported_value("include", "Unsupported 'include': this server adds nothing to its responses on request.");
  if (const Json* t = field(body, "truncation"); t && *t != "disabled")
    unsupported_value("truncation", "Unsupported value for 'truncation': only disabled (a prompt past the context is a 400).");
  echo["truncation"] = "disabled";
  if (const Json* st = field(body, "service_tier"); st && *st != "auto" && *st != "default")
    unsupported_value("service_tier", "Unsupported value for 'service_tier': this server supports only auto or default.");
  if (field(body, "max_tool_calls"))
    unsupported_value("max_tool_calls", "Unsupported 'max_tool_calls': give parallel_tool_calls false for one call.");
  if (const Json* tl = field(body, "top_logprobs"); tl && *tl != 0)
    unsupported_value("top_logprobs", "Unsupported 'top_logprobs': this server returns no log probabilities here.");
  for (const char* key : {"prompt_cache_key", "safety_identifier"})
    if (const Json* v = field(body, key); v && !v->is_string()) invalid_type(key, *v, "a string");

  r.chat = parse_chat_request(chat, limits);
  return r;
}

}  // namespace sluice::serve
