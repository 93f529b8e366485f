// gpt-oss tool declarations: a port of the harmony chat template's render_typescript_type,
// render_tool_namespace and render_builtin_tools macros. OpenAI function tools become a TypeScript-
// like "namespace functions { type NAME = (_: {...}) => any; }" block; JSON Schema types map to
// TypeScript types. The template's whitespace is kept exactly, quirks included: Jinja's scoping
// makes its "object variants of oneOf" check never fire, nested object properties are preceded by
// a newline and 16 spaces, a oneOf variant's default by 20 spaces.
#include "tokenizer/chat_internal.h"

namespace sluice::tokenizer::chat_detail {
namespace {

const char* const kBrowserTool =
    "## browser\n\n"
    "// Tool for browsing.\n"
    "// The `cursor` appears in brackets before each browsing display: `[{cursor}]`.\n"
    "// Cite information from the tool using the following format:\n"
    "// `【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.\n"
    "// Do not quote more than 10 words directly from the tool output.\n"
    "// sources=web (default: web)\n"
    "namespace browser {\n\n"
    "// Searches for information related to `query` and displays `topn` results.\n"
    "type search = (_: {\n"
    "query: string,\n"
    "topn?: number, // default: 10\n"
    "source?: string,\n"
    "}) => any;\n\n"
    "// Opens the link `id` from the page indicated by `cursor` starting at line number `loc`, showing `num_lines` lines.\n"
    "// Valid link ids are displayed with the formatting: `【{id}†.*】`.\n"
    "// If `cursor` is not provided, the most recent page is implied.\n"
    "// If `id` is a string, it is treated as a fully qualified URL associated with `source`.\n"
    "// If `loc` is not provided, the viewport will be positioned at the beginning of the document or centered on the most relevant passage, if available.\n"
    "// Use this function without `id` to scroll to a new location of an opened page.\n"
    "type open = (_: {\n"
    "id?: number | string, // default: -1\n"
    "cursor?: number, // default: -1\n"
    "loc?: number, // default: -1\n"
    "num_lines?: number, // default: -1\n"
    "view_source?: boolean, // default: false\n"
    "source?: string,\n"
    "}) => any;\n\n"
    "// Finds exact matches of `pattern` in the current page, or the page given by `cursor`.\n"
    "type find = (_: {\n"
    "pattern: string,\n"
    "cursor?: number, // default: -1\n"
    "}) => any;\n\n"
    "} // namespace browser\n\n";

const char* const kPythonTool =
    "## python\n\n"
    "Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. This tool should be used for internal reasoning, but not for code that is intended to be visible to the user (e.g. when creating plots, tables, or files).\n\n"
    "When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook environment. python will respond with the output of the execution or time out after 120.0 seconds. The drive at '/mnt/data' can be used to save and persist user files. Internet access for this session is UNKNOWN. Depends on the cluster.\n\n";

// spec[key] when spec is an object that has it (Jinja's attribute lookup on a dict), else null.
const ChatJson& get(const ChatJson& spec, const char* key) {
  static const ChatJson none;
  if (!spec.is_object()) return none;
  auto it = spec.find(key);
  return it == spec.end() ? none : *it;
}

bool has(const ChatJson& spec, const char* key) { return spec.is_object() && spec.contains(key); }

bool is(const ChatJson& v, const char* s) { return v.is_string() && v.get_ref<const std::string&>() == s; }

// Jinja's `needle in container` for a string needle.
bool contains(const ChatJson& container, const std::string& needle) {
  if (container.is_array()) {
    for (const ChatJson& e : container)
      if (e.is_string() && e.get_ref<const std::string&>() == needle) return true;
    return false;
  }
  if (container.is_string()) return container.get_ref<const std::string&>().find(needle) != std::string::npos;
  if (container.is_object()) return container.contains(needle);
  return false;
}

// Jinja's `a|join(sep)` (items printed as Python str()).
std::string join(const ChatJson& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += python_str(items[i]);
  }
  return out;
}

// "string" + x in the template, where x is a string; other values (which the template cannot
// concatenate) are printed as Python's str() would.
std::string concat_text(const ChatJson& v) { return python_str(v); }

std::string typescript_type(const ChatJson& spec) {
  const ChatJson& type = get(spec, "type");
  const bool nullable = truthy(get(spec, "nullable"));
  if (is(type, "array")) {
    const ChatJson& items = get(spec, "items");
    std::string out;
    if (truthy(items)) {
      const ChatJson& item_type = get(items, "type");
      if (is(item_type, "string")) {
        out = "string[]";
      } else if (is(item_type, "number") || is(item_type, "integer")) {
        out = "number[]";
      } else if (is(item_type, "boolean")) {
        out = "boolean[]";
      } else {
        std::string inner = typescript_type(items);
        out = inner == "object | object" || code_points(inner) > 50 ? "any[]" : inner + "[]";
      }
    } else {
      out = "any[]";
    }
    return nullable ? out + " | null" : out;
  }
  if (type.is_array() && !type.empty()) return type.size() > 1 ? join(type, " | ") : python_str(type[0]);
  if (truthy(get(spec, "oneOf"))) {
    const ChatJson& variants = get(spec, "oneOf");
    std::string out;
    for (size_t i = 0; variants.is_array() && i < variants.size(); ++i) {
      const ChatJson& variant = variants[i];
      out += typescript_type(variant);
      if (truthy(get(variant, "description"))) out += "// " + concat_text(get(variant, "description"));
      if (has(variant, "default")) out += std::string(20, ' ') + "// default: " + python_json_dumps(variant["default"], false);
      if (i + 1 < variants.size()) out += " | \n";
    }
    return out;
  }
  if (is(type, "string")) {
    if (truthy(get(spec, "enum"))) return "\"" + join(get(spec, "enum"), "\" | \"") + "\"";
    return nullable ? "string | null" : "string";
  }
  if (is(type, "number") || is(type, "integer")) return "number";
  if (is(type, "boolean")) return "boolean";
  if (is(type, "object")) {
    const ChatJson& properties = get(spec, "properties");
    if (!truthy(properties) || !properties.is_object()) return "object";
    const ChatJson& required = get(spec, "required");
    std::string out = "{\n";
    size_t i = 0;
    for (auto it = properties.begin(); it != properties.end(); ++it, ++i) {
      out += it.key();
      if (!contains(required, it.key())) out += "?";
      out += ": \n" + std::string(16, ' ') + typescript_type(it.value());
      if (i + 1 < properties.size()) out += ", ";
    }
    return out + "}";
  }
  return "any";
}

}  // namespace

std::string harmony_tool_namespace(const ChatJson& tools) {
  std::string out = "## functions\n\nnamespace functions {\n\n";
  for (const ChatJson& tool : tools) {
    const ChatJson& fn = get(tool, "function");
    // The template needs a description; a tool without one gets no comment line (as harmony's own
    // renderer does) instead of the template's error.
    if (has(fn, "description")) out += "// " + concat_text(fn["description"]) + "\n";
    out += "type " + concat_text(get(fn, "name")) + " = ";
    const ChatJson& params = get(fn, "parameters");
    const ChatJson& properties = get(params, "properties");
    if (!truthy(params) || !truthy(properties) || !properties.is_object()) {
      out += "() => any;\n\n";
      continue;
    }
    const ChatJson& required = get(params, "required");
    out += "(_: {\n";
    for (auto it = properties.begin(); it != properties.end(); ++it) {
      const ChatJson& spec = it.value();
      if (truthy(get(spec, "description"))) out += "// " + concat_text(get(spec, "description")) + "\n";
      out += it.key();
      if (!contains(required, it.key())) out += "?";
      out += ": " + typescript_type(spec);
      if (has(spec, "default")) {
        if (truthy(get(spec, "enum"))) out += ", // default: " + concat_text(spec["default"]);
        else if (truthy(get(spec, "oneOf"))) out += "// default: " + concat_text(spec["default"]);
        else out += ", // default: " + python_json_dumps(spec["default"], false);
      }
      out += ",\n";
    }
    out += "}) => any;\n\n";
  }
  return out + "} // namespace functions";
}

std::string harmony_builtin_tools(bool browser, bool python) {
  std::string out;
  if (browser) out += kBrowserTool;
  if (python) out += kPythonTool;
  return out;
}

}  // namespace sluice::tokenizer::chat_detail
