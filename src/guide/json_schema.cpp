// Schema compiler: one GBNF rule per schema node, plus shared primitives (string, number, ...)
// under the same prefix. oneOf is only compiled when a conservative analysis of what each
// alternative accepts shows that no value can match two of them.
#include "guide/json_schema.h"

#include <cmath>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"

namespace sluice::guide {

namespace {

using Json = nlohmann::ordered_json;

// A rule's text for the primitives, `P` standing for the prefix.
constexpr const char* kPrimitives[] = {
    "Pws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?",
    "Pvalue ::= Pobject | Parray | Pstring | Pnumber | Pboolean | Pnull",
    "Pobject ::= \"{\" Pws ( Pstring Pws \":\" Pws Pvalue Pws ( \",\" Pws Pstring Pws \":\" Pws Pvalue Pws )* )? \"}\"",
    "Parray ::= \"[\" Pws ( Pvalue Pws ( \",\" Pws Pvalue Pws )* )? \"]\"",
    "Pstring ::= \"\\\"\" Pchar* \"\\\"\"",
    // Escapes never name a lone surrogate: parsers refuse those.
    "Pchar ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-Ce-fE-F] Phex{3} | [dD] [0-7] Phex{2} "
    "| [dD] [89abAB] Phex{2} \"\\\\u\" [dD] [c-fC-F] Phex{2} ) )",
    "Phex ::= [0-9a-fA-F]",
    "Pinteger ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )",
    "Pnumber ::= Pinteger ( \".\" [0-9]{1,16} )? ( [eE] [+-]? [0-9]{1,2} )?",
    "Pboolean ::= \"true\" | \"false\"",
    "Pnull ::= \"null\"",
    // Real calendar dates only (February stops at 28), years 1000-9999.
    "Pdate ::= [1-9] [0-9]{3} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] ) "
    "| ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | \"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )",
    "Ptime ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? "
    "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
    "Pdate-time ::= Pdate \"T\" Ptime",
    "Puuid ::= Phex{8} \"-\" Phex{4} \"-\" Phex{4} \"-\" Phex{4} \"-\" Phex{12}",
};

const std::set<std::string> kAnnotations = {"title",    "description", "examples",  "example", "default",
                                            "$schema",  "$id",         "$comment",  "deprecated", "readOnly",
                                            "writeOnly", "$defs",      "definitions"};
const std::set<std::string> kHandled = {"type",     "enum",     "const",       "properties", "required",
                                        "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
                                        "anyOf",    "oneOf",    "allOf",       "$ref",       "minLength",
                                        "maxLength", "format",  "uniqueItems"};
const std::set<std::string> kObjectKeys = {"properties", "required", "additionalProperties"};
const std::set<std::string> kArrayKeys = {"items", "prefixItems", "minItems", "maxItems", "uniqueItems"};
const std::set<std::string> kStringKeys = {"minLength", "maxLength", "format"};

// Type bits. An integer-valued number is an integer to JSON Schema, so "number" is both bits.
enum : unsigned { kNull = 1, kBool = 2, kObject = 4, kArray = 8, kString = 16, kInt = 32, kFrac = 64, kAll = 127 };

unsigned type_bit(const std::string& t) {
  if (t == "null") return kNull;
  if (t == "boolean") return kBool;
  if (t == "object") return kObject;
  if (t == "array") return kArray;
  if (t == "string") return kString;
  if (t == "integer") return kInt;
  if (t == "number") return kInt | kFrac;
  return 0;
}

unsigned value_bit(const Json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBool;
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  if (v.is_number_integer() || v.is_number_unsigned()) return kInt;
  const double d = v.get<double>();
  return std::isfinite(d) && d == std::floor(d) ? kInt : kFrac;
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string shown(const std::string& path) { return path.empty() ? "/" : path; }

// A GBNF literal matching exactly `bytes` (valid UTF-8).
std::string literal(const std::string& bytes) {
  std::string out = "\"";
  for (char ch : bytes) {
    const uint8_t c = uint8_t(ch);
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20) {
      const char* hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// What a schema can accept, over-approximated: which types, and when finite, which values; for
// objects, required properties limited to finite values (tags that tell oneOf alternatives apart).
struct Shape {
  unsigned types = kAll;
  bool finite = false;
  std::vector<Json> values;
  std::map<std::string, std::vector<Json>> tags;
};

bool share_value(const std::vector<Json>& a, const std::vector<Json>& b) {
  for (const Json& x : a)
    for (const Json& y : b)
      if (x == y) return true;
  return false;
}

bool disjoint(const Shape& a, const Shape& b) {
  if ((a.types & b.types) == 0) return true;
  if (a.finite && b.finite && !share_value(a.values, b.values)) return true;
  if ((a.types & b.types) == kObject)
    for (const auto& [key, values] : a.tags) {
      auto it = b.tags.find(key);
      if (it != b.tags.end() && !share_value(values, it->second)) return true;
    }
  return false;
}

class Compiler {
 public:
  Compiler(const Json& root, std::string_view prefix) : root_(root), p_(prefix) {
    for (char c : p_)
      SLUICE_CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_',
                   "json schema: rule prefix '", p_, "' has a character outside [a-zA-Z0-9_-]");
  }

  std::string schema_rules() {
    rule(p_ + "root", value(root_, ""));
    return primitives() + out_;
  }

  std::string any_object_rules() {
    rule(p_ + "root", p_ + "object");
    return primitives() + out_;
  }

 private:
  template <typename... Parts>
  [[noreturn]] void error(const std::string& path, Parts&&... parts) const {
    fail("json schema: ", std::forward<Parts>(parts)..., " at ", shown(path));
  }

  std::string primitives() const {
    std::string text;
    for (const char* line : kPrimitives) {
      for (const char* c = line; *c; ++c) {
        // 'P' starts every primitive rule name in the table; no other 'P' occurs there.
        if (*c == 'P')
          text += p_;
        else
          text += *c;
      }
      text += '\n';
    }
    return text;
  }

  std::string fresh() { return p_ + "s" + std::to_string(next_++); }
  std::string prim(const char* name) const { return p_ + name; }

  void rule(const std::string& name, const std::string& body) { out_ += name + " ::= " + body + "\n"; }

  // A rule name for `body` (made a rule unless it is one already).
  std::string named(const std::string& body) {
    if (body.find_first_of(" ()|\"[") == std::string::npos) return body;
    std::string name = fresh();
    rule(name, body);
    return name;
  }

  static uint64_t count(const Json& s, const char* key, const std::string& path, const Compiler& c) {
    const Json& v = s.at(key);
    if (!v.is_number_integer() && !v.is_number_unsigned()) c.error(path, "'", key, "' is not an integer");
    if (!v.is_number_unsigned() && v.get<int64_t>() < 0) c.error(path, "'", key, "' is negative");
    return v.get<uint64_t>();
  }

  const Json& resolve(const std::string& ref, const std::string& path) const {
    if (ref == "#") return root_;
    for (const char* base : {"#/$defs/", "#/definitions/"}) {
      const std::string b = base;
      if (ref.compare(0, b.size(), b) != 0) continue;
      std::string name;
      for (size_t i = b.size(); i < ref.size(); ++i) {
        if (ref[i] == '/') error(path, "'$ref' to '", ref, "' is not supported (one level under $defs only)");
        if (ref[i] == '~' && i + 1 < ref.size() && (ref[i + 1] == '0' || ref[i + 1] == '1')) {
          name += ref[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          name += ref[i];
        }
      }
      const std::string table = b.substr(2, b.size() - 3);
      if (!root_.contains(table) || !root_[table].is_object() || !root_[table].contains(name))
        error(path, "'$ref' to '", ref, "' names no definition");
      return root_[table][name];
    }
    error(path, "'$ref' to '", ref, "' is not supported (only #, #/$defs/NAME and #/definitions/NAME)");
  }

  std::string ref_rule(const std::string& ref, const std::string& path) {
    if (ref == "#") return p_ + "root";
    auto it = refs_.find(ref);
    if (it != refs_.end()) return it->second;
    const Json& target = resolve(ref, path);
    const std::string name = p_ + "def" + std::to_string(next_++);
    refs_.emplace(ref, name);  // before compiling, so recursive references find it
    rule(name, value(target, ref.substr(1)));
    return name;
  }

  // The keywords of `s` that constrain values, after refusing unknown ones.
  std::set<std::string> keywords(const Json& s, const std::string& path) const {
    std::set<std::string> keys;
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (kAnnotations.count(k) || k.compare(0, 2, "x-") == 0) continue;
      if (!kHandled.count(k)) error(path, "'", k, "'", " is not supported");
      keys.insert(k);
    }
    return keys;
  }

  void alone(const std::set<std::string>& keys, const char* key, const std::string& path) const {
    for (const std::string& k : keys)
      if (k != key) error(path, "'", k, "' beside '", key, "' is not supported");
  }

  // A rule name (or primitive) matching exactly the instances this grammar emits for `s`.
  std::string value(const Json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) error(path, "schema false matches nothing");
      return prim("value");
    }
    if (!s.is_object()) error(path, "a schema must be an object or a boolean");
    const std::set<std::string> keys = keywords(s, path);
    if (keys.count("$ref")) {
      alone(keys, "$ref", path);
      if (!s["$ref"].is_string()) error(path, "'$ref' is not a string");
      return ref_rule(s["$ref"].get<std::string>(), path);
    }
    if (keys.count("allOf")) {
      alone(keys, "allOf", path);
      if (!s["allOf"].is_array() || s["allOf"].size() != 1)
        error(path, "'allOf' is supported only with exactly one schema");
      return value(s["allOf"][0], path + "/allOf/0");
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!keys.count(key)) continue;
      alone(keys, key, path);
      const Json& alts = s[key];
      if (!alts.is_array() || alts.empty()) error(path, "'", key, "' is not a non-empty array");
      if (std::string(key) == "oneOf") {
        std::vector<Shape> shapes;
        for (const Json& a : alts) shapes.push_back(shape(a, 0));
        for (size_t i = 0; i < shapes.size(); ++i)
          for (size_t j = i + 1; j < shapes.size(); ++j)
            if (!disjoint(shapes[i], shapes[j]))
              error(path, "'oneOf' alternatives ", i, " and ", j, " may both match a value (not supported)");
      }
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i)
        body += (i ? " | " : "") + value(alts[i], path + "/" + key + "/" + std::to_string(i));
      return named("( " + body + " )");
    }
    unsigned types = kAll;
    if (keys.count("type")) {
      const Json& t = s["type"];
      types = 0;
      for (const Json& name : t.is_array() ? t : Json::array({t})) {
        if (!name.is_string() || !type_bit(name.get<std::string>()))
          error(path, "unknown type ", name.dump());
        types |= type_bit(name.get<std::string>());
      }
    }
    if (keys.count("enum") || keys.count("const")) return finite(s, keys, types, path);
    if (!keys.count("type")) {
      // No type: narrowing to the types the keywords describe is a subset of what s accepts.
      unsigned implied = 0;
      for (const std::string& k : keys) {
        if (kObjectKeys.count(k)) implied |= kObject;
        if (kArrayKeys.count(k)) implied |= kArray;
        if (kStringKeys.count(k)) implied |= kString;
      }
      if (implied) types = implied;
    }
    if (types == kAll) return prim("value");
    std::vector<std::string> alts;
    if (types & kObject) alts.push_back(object(s, path));
    if (types & kArray) alts.push_back(array(s, path));
    if (types & kString) alts.push_back(string(s, path));
    if (types & kFrac)
      alts.push_back(prim("number"));
    else if (types & kInt)
      alts.push_back(prim("integer"));
    if (types & kBool) alts.push_back(prim("boolean"));
    if (types & kNull) alts.push_back(prim("null"));
    if (alts.size() == 1) return alts[0];
    std::string body;
    for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
    return named("( " + body + " )");
  }

  std::string finite(const Json& s, const std::set<std::string>& keys, unsigned types, const std::string& path) {
    for (const std::string& k : keys)
      if (k != "enum" && k != "const" && k != "type") error(path, "'", k, "' beside 'enum' or 'const' is not supported");
    std::vector<Json> values;
    if (keys.count("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) error(path, "'enum' is not a non-empty array");
      for (const Json& v : s["enum"])
        if (!keys.count("const") || v == s["const"]) values.push_back(v);
    } else {
      values.push_back(s["const"]);
    }
    std::string body;
    for (const Json& v : values) {
      if (!(value_bit(v) & types)) continue;
      body += (body.empty() ? "" : " | ") + literal(v.dump());
    }
    if (body.empty()) error(path, "'enum'/'const' leaves no value of the allowed types");
    return named("( " + body + " )");
  }

  std::string object(const Json& s, const std::string& path) {
    struct Property {
      std::string name;
      Json schema;
      std::string path;
    };
    std::vector<Property> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) error(path, "'required' is not an array");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) error(path, "'required' holds a non-string");
        required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) error(path, "'properties' is not an object");
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
        // An optional property whose schema is false is simply never written.
        if (it.value().is_boolean() && !it.value().get<bool>() && !required.count(it.key())) continue;
        props.push_back({it.key(), it.value(), path + "/properties/" + pointer_token(it.key())});
      }
    }
    for (const std::string& name : required) {
      bool declared = false;
      for (const Property& pr : props) declared = declared || pr.name == name;
      if (declared) continue;
      // Required but undeclared: its value must satisfy additionalProperties (false: nothing can).
      const Json extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
      if (extra.is_boolean() && !extra.get<bool>())
        error(path, "required property '", name, "' is not allowed by 'additionalProperties' false");
      props.push_back({name, extra, path + "/additionalProperties"});
    }
    const std::string ws = prim("ws");
    if (props.empty() && s.contains("properties")) return named("\"{\" " + ws + " \"}\"");
    if (props.empty()) {
      const Json extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
      if (extra.is_boolean() && !extra.get<bool>()) return named("\"{\" " + ws + " \"}\"");
      const std::string v = value(extra, path + "/additionalProperties");
      if (v == prim("value")) return prim("object");
      const std::string kv = prim("string") + " " + ws + " \":\" " + ws + " " + v + " " + ws;
      return named("\"{\" " + ws + " ( " + kv + " ( \",\" " + ws + " " + kv + " )* )? \"}\"");
    }
    // Declared order; a required property always, an optional one maybe. head_i: properties i..n
    // with none written yet; tail_i: the same after one was written (so each starts with ",").
    const size_t n = props.size();
    std::vector<std::string> kv(n);
    for (size_t i = 0; i < n; ++i)
      kv[i] = named(literal(Json(props[i].name).dump()) + " " + ws + " \":\" " + ws + " " +
                    value(props[i].schema, props[i].path) + " " + ws);
    // Only head_i up to the first required property and tail_i past 0 are ever referenced.
    size_t first_required = n;
    for (size_t i = 0; i < n && first_required == n; ++i)
      if (required.count(props[i].name)) first_required = i;
    std::string tail, head;  // tail_{i+1}, head_{i+1}: "" for nothing
    for (size_t i = n; i-- > 0;) {
      const bool req = required.count(props[i].name) > 0;
      const std::string item = kv[i] + (tail.empty() ? "" : " " + tail);
      if (i <= first_required) {
        if (req)
          head = named(item);
        else
          head = named(head.empty() ? "( " + item + " )?" : "( " + item + " | " + head + " )");
      }
      if (i > 0) {
        const std::string part = "\",\" " + ws + " " + kv[i];
        tail = named((req ? part : "( " + part + " )?") + (tail.empty() ? "" : " " + tail));
      }
    }
    return named("\"{\" " + ws + " " + head + " \"}\"");
  }

  std::string array(const Json& s, const std::string& path) {
    if (s.contains("uniqueItems") && !(s["uniqueItems"].is_boolean() && !s["uniqueItems"].get<bool>()))
      error(path, "'uniqueItems' true is not supported");
    std::vector<Json> prefix;
    Json items = Json(true);
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) error(path, "'prefixItems' is not an array");
      for (const Json& p : s["prefixItems"]) prefix.push_back(p);
    }
    if (s.contains("items")) {
      if (s["items"].is_array()) error(path, "'items' as an array (draft 7 tuples) is not supported; use 'prefixItems'");
      items = s["items"];
    }
    const uint64_t unbounded = UINT64_MAX;
    const uint64_t lo = s.contains("minItems") ? count(s, "minItems", path, *this) : 0;
    const uint64_t hi = s.contains("maxItems") ? count(s, "maxItems", path, *this) : unbounded;
    if (hi < lo) error(path, "'maxItems' below 'minItems' matches nothing");
    if (hi != unbounded && hi > 4096) error(path, "'maxItems' above 4096 is not supported");
    if (lo > 4096) error(path, "'minItems' above 4096 is not supported");
    const std::string ws = prim("ws");
    const bool no_more = items.is_boolean() && !items.get<bool>();
    // Items from position i on, position i being next (after a comma when i > 0).
    std::string rest;
    const size_t k = prefix.size();
    const uint64_t stop = std::min<uint64_t>(k, hi);
    {
      // Past the prefix: all further items follow `items`.
      const uint64_t from = stop;
      const uint64_t need = lo > from ? lo - from : 0;
      const uint64_t room = hi == unbounded ? unbounded : hi - from;
      if (no_more || room == 0) {
        if (need > 0) error(path, "'minItems' needs more items than the schema allows");
      } else {
        const std::string item = value(items, path + "/items");
        const std::string sep = from > 0 ? "\",\" " + ws + " " : "";
        std::string more;
        if (room != 1) {
          const uint64_t mlo = need > 0 ? need - 1 : 0;
          const std::string reps = room == unbounded ? "{" + std::to_string(mlo) + ",}"
                                                     : "{" + std::to_string(mlo) + "," + std::to_string(room - 1) + "}";
          more = " ( \",\" " + ws + " " + item + " " + ws + " )" + reps;
        }
        const std::string body = sep + item + " " + ws + more;
        rest = need > 0 ? named(body) : named("( " + body + " )?");
      }
    }
    for (uint64_t i = stop; i-- > 0;) {
      const std::string sep = i > 0 ? "\",\" " + ws + " " : "";
      const std::string body =
          sep + value(prefix[i], path + "/prefixItems/" + std::to_string(i)) + " " + ws + (rest.empty() ? "" : " " + rest);
      rest = i < lo ? named(body) : named("( " + body + " )?");
    }
    return named("\"[\" " + ws + (rest.empty() ? "" : " " + rest) + " \"]\"");
  }

  std::string string(const Json& s, const std::string& path) {
    if (s.contains("format")) {
      if (s.contains("minLength") || s.contains("maxLength"))
        error(path, "'minLength'/'maxLength' beside 'format' is not supported");
      const Json& f = s["format"];
      const std::string name = f.is_string() ? f.get<std::string>() : "";
      if (name != "date" && name != "time" && name != "date-time" && name != "uuid")
        error(path, "'format' ", f.dump(), " is not supported (date, time, date-time, uuid)");
      return named("\"\\\"\" " + prim(name.c_str()) + " \"\\\"\"");
    }
    if (!s.contains("minLength") && !s.contains("maxLength")) return prim("string");
    const uint64_t lo = s.contains("minLength") ? count(s, "minLength", path, *this) : 0;
    const uint64_t hi = s.contains("maxLength") ? count(s, "maxLength", path, *this) : UINT64_MAX;
    if (hi < lo) error(path, "'maxLength' below 'minLength' matches nothing");
    if (lo > 10000 || (hi != UINT64_MAX && hi > 10000)) error(path, "'minLength'/'maxLength' above 10000 is not supported");
    const std::string reps =
        hi == UINT64_MAX ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
    return named("\"\\\"\" " + prim("char") + reps + " \"\\\"\"");
  }

  // Over-approximates what `s` accepts (see Shape); `depth` stops recursive references.
  Shape shape(const Json& s, int depth) const {
    Shape out;
    if (s.is_boolean()) {
      out.types = s.get<bool>() ? unsigned(kAll) : 0u;
      return out;
    }
    if (!s.is_object() || depth > 32) return out;
    if (s.contains("$ref") && s["$ref"].is_string()) return shape(resolve(s["$ref"].get<std::string>(), ""), depth + 1);
    if (s.contains("allOf") && s["allOf"].is_array() && s["allOf"].size() == 1) return shape(s["allOf"][0], depth + 1);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key) || !s[key].is_array()) continue;
      out.types = 0;
      out.finite = true;
      for (const Json& a : s[key]) {
        Shape x = shape(a, depth + 1);
        out.types |= x.types;
        out.finite = out.finite && x.finite;
        out.values.insert(out.values.end(), x.values.begin(), x.values.end());
      }
      if (!out.finite) out.values.clear();
      return out;
    }
    if (s.contains("type")) {
      const Json& t = s["type"];
      out.types = 0;
      for (const Json& name : t.is_array() ? t : Json::array({t}))
        if (name.is_string()) out.types |= type_bit(name.get<std::string>());
    }
    if (s.contains("enum") && s["enum"].is_array()) {
      out.finite = true;
      for (const Json& v : s["enum"]) out.values.push_back(v);
    } else if (s.contains("const")) {
      out.finite = true;
      out.values.push_back(s["const"]);
    }
    if (out.finite) {
      unsigned bits = 0;
      for (const Json& v : out.values) bits |= value_bit(v);
      out.types &= bits;
    }
    if (s.contains("properties") && s["properties"].is_object() && s.contains("required") && s["required"].is_array())
      for (const Json& r : s["required"]) {
        if (!r.is_string() || !s["properties"].contains(r.get<std::string>())) continue;
        Shape p = shape(s["properties"][r.get<std::string>()], depth + 1);
        if (p.finite) out.tags[r.get<std::string>()] = p.values;
      }
    return out;
  }

  const Json& root_;
  std::string p_;
  std::string out_;
  std::map<std::string, std::string> refs_;
  int next_ = 0;
};

}  // namespace

std::string json_schema_gbnf(const nlohmann::ordered_json& schema, std::string_view rule_prefix) {
  return Compiler(schema, rule_prefix).schema_rules();
}

std::string json_schema_gbnf(const nlohmann::json& schema, std::string_view rule_prefix) {
  return json_schema_gbnf(Json(schema), rule_prefix);
}

std::string json_any_object_gbnf(std::string_view rule_prefix) {
  const Json none;
  return Compiler(none, rule_prefix).any_object_rules();
}

Grammar json_schema_grammar(const nlohmann::ordered_json& schema) { return parse_gbnf(json_schema_gbnf(schema)); }

Grammar json_schema_grammar(const nlohmann::json& schema) { return parse_gbnf(json_schema_gbnf(schema)); }

Grammar json_any_object_grammar() { return parse_gbnf(json_any_object_gbnf()); }

}  // namespace sluice::guide
