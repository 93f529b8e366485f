// Request validation for the OpenAI-compatible endpoints: field by field, strict about names, types
// and values, so that a client never gets a silently ignored parameter.
#include "serve/openai_request.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "format/json_util.h"
#include "serve/json_fields.h"

namespace sluice::serve {
namespace {

const std::set<std::string> kCommonFields = {
    "model",  "max_tokens",       "stream",           "stream_options", "n",          "temperature", "top_p",
    "seed",   "stop",             "user",             "metadata",       "logit_bias", "logprobs",    "presence_penalty",
    "frequency_penalty", "ignore_eos"};
const std::set<std::string> kCompletionFields = {"prompt", "best_of", "echo", "suffix"};
const std::set<std::string> kChatFields = {"messages",  "max_completion_tokens", "top_logprobs", "response_format",
                                           "tools",     "tool_choice",           "parallel_tool_calls", "modalities",
                                           "audio",     "reasoning_effort",      "prediction", "service_tier",
                                           "store"};

bool is_integer(const Json& v) { return json_is_integer(v); }
int64_t as_int(const Json& v) { return json_as_int(v); }

// Fields that are accepted only at their no-op value.
void require_null_or(const Json& body, const std::string& key, const std::function<bool(const Json&)>& ok,
                     const std::string& what) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return;
  if (!ok(*it)) unsupported_value(key, "Unsupported value for '" + key + "': this server supports only " + what + ".");
}

double number_in(const Json& body, const std::string& key, double lo, double hi, double dflt) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return dflt;
  if (!it->is_number()) invalid_type(key, *it, "a number");
  double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    invalid(key, "Invalid value for '" + key + "': " + it->dump() + " is not in [" + Json(lo).dump() + ", " +
                     Json(hi).dump() + "].",
            "invalid_value");
  return v;
}

bool bool_field(const Json& body, const std::string& key, bool dflt) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return dflt;
  if (!it->is_boolean()) invalid_type(key, *it, "a boolean");
  return it->get<bool>();
}

int64_t token_count(const Json& body, const std::string& key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return 0;
  if (!is_integer(*it)) invalid_type(key, *it, "an integer");
  int64_t v = as_int(*it);
  if (v < 0) invalid(key, "Invalid value for '" + key + "': it must be at least 0 (0 = the default).", "invalid_value");
  return v;
}

void parse_common(const Json& body, const RequestLimits& limits, const std::set<std::string>& own, CommonRequest& r) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (!kCommonFields.count(it.key()) && !own.count(it.key()))
      unknown_parameter(it.key());
  }
  auto model = body.find("model");
  if (model == body.end() || model->is_null())
    invalid("model", "you must provide a model parameter", "missing_required_parameter");
  if (!model->is_string()) invalid_type("model", *model, "a string");
  if (model->get<std::string>() != limits.model_id)
    throw ApiError(404, "The model '" + model->get<std::string>() + "' does not exist; this server serves '" +
                            limits.model_id + "'.",
                   "invalid_request_error", "model", "model_not_found");

  r.stream = bool_field(body, "stream", false);
  r.ignore_eos = bool_field(body, "ignore_eos", false);
  if (auto so = body.find("stream_options"); so != body.end() && !so->is_null()) {
    if (!r.stream)
      invalid("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
              "invalid_value");
    if (!so->is_object()) invalid_type("stream_options", *so, "an object");
    for (auto f = so->begin(); f != so->end(); ++f) {
      if (f.key() != "include_usage") unknown_parameter("stream_options." + f.key());
      if (!f->is_boolean()) invalid_type("stream_options.include_usage", *f, "a boolean");
      r.include_usage = f->get<bool>();
    }
  }
  if (auto n = body.find("n"); n != body.end() && !n->is_null()) {
    if (!is_integer(*n)) invalid_type("n", *n, "an integer");
    if (as_int(*n) != 1) unsupported_value("n", "Unsupported value for 'n': this server generates one choice (n = 1).");
  }
  r.sampling.temperature = number_in(body, "temperature", 0.0, 2.0, 1.0);
  r.sampling.top_p = number_in(body, "top_p", 0.0, 1.0, 1.0);
  // top_p = 0 keeps only the most likely token: that is greedy decoding.
  if (r.sampling.top_p == 0.0) {
    r.sampling.temperature = 0.0;
    r.sampling.top_p = 1.0;
  }
  if (auto seed = body.find("seed"); seed != body.end() && !seed->is_null()) {
    if (!is_integer(*seed)) invalid_type("seed", *seed, "an integer");
    r.sampling.seed = uint64_t(as_int(*seed));
    r.seed_given = true;
  }
  if (auto stop = body.find("stop"); stop != body.end() && !stop->is_null()) {
    if (stop->is_string()) {
      r.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > 4) invalid("stop", "Invalid 'stop': at most 4 stop sequences are allowed.", "invalid_value");
      for (const auto& s : *stop) {
        if (!s.is_string()) invalid_type("stop", s, "a string or an array of strings");
        r.stop.push_back(s.get<std::string>());
      }
    } else {
      invalid_type("stop", *stop, "a string or an array of strings");
    }
    for (const auto& s : r.stop)
      if (s.empty()) invalid("stop", "Invalid 'stop': stop sequences must not be empty.", "invalid_value");
  }
  if (auto user = body.find("user"); user != body.end() && !user->is_null() && !user->is_string())
    invalid_type("user", *user, "a string");
  if (auto md = body.find("metadata"); md != body.end() && !md->is_null()) {
    if (!md->is_object()) invalid_type("metadata", *md, "an object");
    for (auto f = md->begin(); f != md->end(); ++f)
      if (!f->is_string()) invalid_type("metadata." + f.key(), *f, "a string");
  }
  auto zero = [](const Json& v) { return v.is_number() && v.get<double>() == 0.0; };
  require_null_or(body, "presence_penalty", zero, "0");
  require_null_or(body, "frequency_penalty", zero, "0");
  require_null_or(body, "logit_bias", [](const Json& v) { return v.is_object() && v.empty(); }, "an empty object");
  (void)limits;
}

// A message's content as one string: a string, null, or an array of text parts.
Json content_text(const Json& content, const std::string& param) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array()) invalid_type(param, content, "a string or an array of text parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& part = content[i];
    std::string p = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) invalid_type(p, part, "an object");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) invalid(p + ".type", "Missing or invalid 'type' in a content part.");
    if (*type != "text")
      unsupported_value(p + ".type", "Unsupported content part type '" + type->get<std::string>() +
                                   "': this server accepts text only.");
    for (auto f = part.begin(); f != part.end(); ++f)
      if (f.key() != "type" && f.key() != "text")
        invalid(p + "." + f.key(), "Unrecognized content part field: " + f.key(), "unknown_parameter");
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) invalid(p + ".text", "A text content part needs a 'text' string.");
    text += t->get<std::string>();
  }
  return text;
}

Json validate_tool_calls(const Json& calls, const std::string& param) {
  if (!calls.is_array()) invalid_type(param, calls, "an array");
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    std::string p = param + "[" + std::to_string(i) + "]";
    const Json& c = calls[i];
    if (!c.is_object()) invalid_type(p, c, "an object");
    for (auto f = c.begin(); f != c.end(); ++f)
      if (f.key() != "id" && f.key() != "type" && f.key() != "function")
        invalid(p + "." + f.key(), "Unrecognized tool call field: " + f.key(), "unknown_parameter");
    if (c.contains("type") && c["type"] != "function")
      unsupported_value(p + ".type", "Unsupported tool call type: only 'function' is supported.");
    if (c.contains("id") && !c["id"].is_string()) invalid_type(p + ".id", c["id"], "a string");
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) invalid(p + ".function", "A tool call needs a 'function' object.");
    for (auto f = fn->begin(); f != fn->end(); ++f)
      if (f.key() != "name" && f.key() != "arguments")
        invalid(p + ".function." + f.key(), "Unrecognized function field: " + f.key(), "unknown_parameter");
    if (!fn->contains("name") || !(*fn)["name"].is_string())
      invalid(p + ".function.name", "A tool call needs a function name string.");
    if (fn->contains("arguments") && !(*fn)["arguments"].is_string() && !(*fn)["arguments"].is_object())
      invalid_type(p + ".function.arguments", (*fn)["arguments"], "a JSON string");
    out.push_back(c);
  }
  return out;
}

Json validate_messages(const Json& messages) {
  if (!messages.is_array()) invalid_type("messages", messages, "an array");
  if (messages.empty()) invalid("messages", "'messages' must contain at least one message.", "invalid_value");
  static const std::set<std::string> base = {"role", "content", "name"};
  static const std::set<std::string> assistant = {"role", "content", "name", "reasoning_content", "tool_calls"};
  static const std::set<std::string> tool = {"role", "content", "name", "tool", "tool_call_id", "id"};
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string p = "messages[" + std::to_string(i) + "]";
    const Json& m = messages[i];
    if (!m.is_object()) invalid_type(p, m, "an object");
    auto role_it = m.find("role");
    if (role_it == m.end() || !role_it->is_string()) invalid(p + ".role", "Each message needs a 'role' string.");
    std::string role = role_it->get<std::string>();
    const std::set<std::string>* allowed = nullptr;
    if (role == "system" || role == "developer" || role == "user") allowed = &base;
    else if (role == "assistant") allowed = &assistant;
    else if (role == "tool") allowed = &tool;
    else
      invalid(p + ".role", "Invalid value for '" + p + ".role': '" + role +
                               "' (supported: system, developer, user, assistant, tool).",
              "invalid_value");
    Json msg = Json::object();
    for (auto f = m.begin(); f != m.end(); ++f) {
      if (!allowed->count(f.key()))
        invalid(p + "." + f.key(), "Unrecognized field '" + f.key() + "' in a " + role + " message.",
                "unknown_parameter");
    }
    msg["role"] = role == "developer" ? "system" : role;
    Json content = m.contains("content") ? content_text(m["content"], p + ".content") : Json(nullptr);
    bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null() && !m["tool_calls"].empty();
    if (content.is_null() && !(role == "assistant" && has_calls) && role != "assistant")
      invalid(p + ".content", "A " + role + " message needs 'content'.", "missing_required_parameter");
    msg["content"] = std::move(content);
    for (const char* key : {"name", "reasoning_content", "tool", "tool_call_id", "id"}) {
      auto f = m.find(key);
      if (f == m.end() || f->is_null()) continue;
      if (!f->is_string()) invalid_type(p + "." + key, *f, "a string");
      msg[key] = *f;
    }
    if (has_calls) msg["tool_calls"] = validate_tool_calls(m["tool_calls"], p + ".tool_calls");
    out.push_back(std::move(msg));
  }
  return out;
}

Json validate_tools(const Json& tools) {
  if (tools.is_null()) return nullptr;
  if (!tools.is_array()) invalid_type("tools", tools, "an array");
  if (tools.empty()) return nullptr;
  for (size_t i = 0; i < tools.size(); ++i) {
    std::string p = "tools[" + std::to_string(i) + "]";
    const Json& t = tools[i];
    if (!t.is_object()) invalid_type(p, t, "an object");
    for (auto f = t.begin(); f != t.end(); ++f)
      if (f.key() != "type" && f.key() != "function")
        invalid(p + "." + f.key(), "Unrecognized tool field: " + f.key(), "unknown_parameter");
    if (!t.contains("type") || t["type"] != "function")
      unsupported_value(p + ".type", "Unsupported tool type: only 'function' tools are supported.");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) invalid(p + ".function", "A function tool needs a 'function' object.");
    for (auto f = fn->begin(); f != fn->end(); ++f)
      if (f.key() != "name" && f.key() != "description" && f.key() != "parameters" && f.key() != "strict")
        invalid(p + ".function." + f.key(), "Unrecognized function field: " + f.key(), "unknown_parameter");
    if (!fn->contains("name") || !(*fn)["name"].is_string() || (*fn)["name"].get<std::string>().empty())
      invalid(p + ".function.name", "A function tool needs a non-empty 'name' string.");
    if (fn->contains("description") && !(*fn)["description"].is_string())
      invalid_type(p + ".function.description", (*fn)["description"], "a string");
    if (fn->contains("parameters") && !(*fn)["parameters"].is_object())
      invalid_type(p + ".function.parameters", (*fn)["parameters"], "an object");
    if (fn->contains("strict") && !(*fn)["strict"].is_boolean() && !(*fn)["strict"].is_null())
      invalid_type(p + ".function.strict", (*fn)["strict"], "a boolean");
  }
  return tools;
}

}  // namespace

void invalid(const std::string& param, const std::string& message, const std::string& code) {
  throw ApiError(400, message, "invalid_request_error", param, code);
}

void invalid_type(const std::string& param, const Json& v, const std::string& want) {
  invalid(param, "Invalid type for '" + param + "': expected " + want + ", but got " + json_type_name(v) + ".",
          "invalid_type");
}

void unknown_parameter(const std::string& param) {
  invalid(param, "Unrecognized request argument supplied: " + param, "unknown_parameter");
}

void unsupported_value(const std::string& param, const std::string& message) {
  invalid(param, message, "unsupported_value");
}

void only_keys(const Json& obj, const std::string& where, std::initializer_list<const char*> allowed) {
  for (auto f = obj.begin(); f != obj.end(); ++f)
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return f.key() == a; }))
      unknown_parameter(where + "." + f.key());
}

Json error_body(const ApiError& e) {
  Json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return Json{{"error", err}};
}

Json parse_body(const std::string& body) {
  bool too_deep = false;
  Json j = format::parse_json_or_discarded<Json>(body, &too_deep);
  if (too_deep)
    invalid("", "The JSON body of your request nests arrays and objects deeper than this server's limit of " +
                    std::to_string(format::kMaxJsonDepth) + " levels.",
            "invalid_json");
  if (j.is_discarded())
    invalid("", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
                "HTTP library correctly. The OpenAI API expects a JSON payload.)",
            "invalid_json");
  if (!j.is_object()) invalid("", "The request body must be a JSON object.", "invalid_json");
  return j;
}

CompletionRequest parse_completion_request(Json body, const RequestLimits& limits) {
  CompletionRequest r;
  parse_common(body, limits, kCompletionFields, r);
  auto prompt = body.find("prompt");
  if (prompt == body.end() || prompt->is_null())
    invalid("prompt", "you must provide a prompt parameter", "missing_required_parameter");
  // Moved out, not copied: a prompt may be as long as the largest request body.
  if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    r.prompt = std::move((*prompt)[0].get_ref<std::string&>());
  } else if (prompt->is_string()) {
    r.prompt = std::move(prompt->get_ref<std::string&>());
  } else if (prompt->is_array()) {
    unsupported_value("prompt", "Unsupported 'prompt': this server takes one text prompt (a string).");
  } else {
    invalid_type("prompt", *prompt, "a string");
  }
  if (r.prompt.empty()) invalid("prompt", "'prompt' must not be empty.", "invalid_value");
  r.max_tokens = token_count(body, "max_tokens");
  if (auto b = body.find("best_of"); b != body.end() && !b->is_null()) {
    if (!is_integer(*b)) invalid_type("best_of", *b, "an integer");
    if (as_int(*b) != 1) unsupported_value("best_of", "Unsupported value for 'best_of': only 1 is supported.");
  }
  require_null_or(body, "echo", [](const Json& v) { return v.is_boolean() && !v.get<bool>(); }, "false");
  if (auto lp = body.find("logprobs"); lp != body.end() && !lp->is_null()) {
    if (!is_integer(*lp)) invalid_type("logprobs", *lp, "an integer");
    if (as_int(*lp) < 0 || as_int(*lp) > 20)
      invalid("logprobs", "Invalid value for 'logprobs': it must be in 0..20.", "invalid_value");
    r.top_logprobs = int(as_int(*lp));
  }
  require_null_or(body, "suffix", [](const Json& v) { return v.is_string() && v.get<std::string>().empty(); },
                  "an empty suffix");
  return r;
}

ChatRequest parse_chat_request(const Json& body, const RequestLimits& limits) {
  ChatRequest r;
  parse_common(body, limits, kChatFields, r);
  auto messages = body.find("messages");
  if (messages == body.end() || messages->is_null())
    invalid("messages", "you must provide a messages parameter", "missing_required_parameter");
  r.messages = validate_messages(*messages);
  int64_t a = token_count(body, "max_tokens"), b = token_count(body, "max_completion_tokens");
  if (body.contains("max_tokens") && !body["max_tokens"].is_null() && body.contains("max_completion_tokens") &&
      !body["max_completion_tokens"].is_null())
    invalid("max_tokens", "Give either 'max_tokens' or 'max_completion_tokens', not both.", "invalid_value");
  r.max_tokens = a ? a : b;
  const bool logprobs = bool_field(body, "logprobs", false);
  if (auto top = body.find("top_logprobs"); top != body.end() && !top->is_null()) {
    if (!is_integer(*top)) invalid_type("top_logprobs", *top, "an integer");
    if (as_int(*top) < 0 || as_int(*top) > 20)
      invalid("top_logprobs", "Invalid value for 'top_logprobs': it must be in 0..20.", "invalid_value");
    if (!logprobs) invalid("top_logprobs", "'top_logprobs' needs 'logprobs' to be true.", "invalid_value");
    r.top_logprobs = int(as_int(*top));
  } else if (logprobs) {
    r.top_logprobs = 0;
  }
  require_null_or(body, "audio", [](const Json&) { return false; }, "null (text only)");
  require_null_or(body, "prediction", [](const Json&) { return false; }, "null");
  require_null_or(body, "store", [](const Json& v) { return v.is_boolean() && !v.get<bool>(); }, "false");
  require_null_or(body, "service_tier",
                  [](const Json& v) { return v.is_string() && (v == "auto" || v == "default"); }, "auto or default");
  require_null_or(body, "modalities", [](const Json& v) { return v == Json::array({"text"}); }, "[\"text\"]");
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean()) invalid_type("parallel_tool_calls", *p, "a boolean");
    r.parallel_tool_calls = p->get<bool>();
  }
  r.tools = validate_tools(body.contains("tools") ? body["tools"] : Json(nullptr));
  if (auto tc = body.find("tool_choice"); tc != body.end() && !tc->is_null()) {
    if (tc->is_object()) {  // {"type": "function", "function": {"name": NAME}}: that tool must be called
      const auto fn = tc->find("function");
      if (tc->value("type", Json()) != "function" || fn == tc->end() || !fn->is_object() || !fn->contains("name") ||
          !(*fn)["name"].is_string() || tc->size() != 2 || fn->size() != 1)
        invalid("tool_choice",
                "A named 'tool_choice' is {\"type\": \"function\", \"function\": {\"name\": NAME}}.", "invalid_value");
      const std::string name = (*fn)["name"].get<std::string>();
      bool known = false;
      if (r.tools.is_array())
        for (const Json& t : r.tools) known = known || t["function"]["name"] == name;
      if (!known)
        invalid("tool_choice", "'tool_choice' names '" + name + "', which is not among the tools.", "invalid_value");
      r.tool_choice = "required";
      r.tool_name = name;
    } else {
      if (!tc->is_string())
        unsupported_value("tool_choice", "Unsupported 'tool_choice': give auto, none, required or a named function.");
      std::string v = tc->get<std::string>();
      if (v != "auto" && v != "none" && v != "required")
        invalid("tool_choice", "Invalid value for 'tool_choice': '" + v + "' (supported: auto, none, required).",
                "invalid_value");
      if (v == "required" && r.tools.is_null())
        invalid("tool_choice", "'tool_choice' is 'required' but no tools were given.", "invalid_value");
      r.tool_choice = v;
    }
  }
  if (auto rf = body.find("response_format"); rf != body.end() && !rf->is_null()) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      invalid("response_format", "'response_format' must be an object with a 'type'.");
    std::string t = (*rf)["type"].get<std::string>();
    // Keys OpenAI does not define are refused, as at the top level (a typo would otherwise be
    // ignored silently).
    only_keys(*rf, "response_format", t == "json_schema" ? std::initializer_list<const char*>{"type", "json_schema"}
                                                          : std::initializer_list<const char*>{"type"});
    if (t == "json_schema") {
      auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object() || !js->contains("schema") || !(*js)["schema"].is_object())
        invalid("response_format.json_schema", "A json_schema response format needs json_schema.schema (an object).");
      only_keys(*js, "response_format.json_schema", {"name", "description", "schema", "strict"});
      r.response_format = *rf;
    } else if (t == "json_object") {
      r.response_format = *rf;
    } else if (t != "text") {
      invalid("response_format.type",
              "Invalid value for 'response_format.type': '" + t + "' (supported: text, json_object, json_schema).",
              "invalid_value");
    }
  }
  if (auto re = body.find("reasoning_effort"); re != body.end() && !re->is_null()) {
    if (!re->is_string()) invalid_type("reasoning_effort", *re, "a string");
    std::string v = re->get<std::string>();
    // Which efforts a model takes depends on its chat format (serve/chat_options.cpp).
    if (v != "low" && v != "medium" && v != "high" && v != "max" && v != "none")
      invalid("reasoning_effort",
              "Invalid value for 'reasoning_effort': '" + v +
                  "' (supported: low, medium, high, max; none turns thinking off).",
              "invalid_value");
    r.reasoning_effort = v;
  }
  return r;
}

}  // namespace sluice::serve
