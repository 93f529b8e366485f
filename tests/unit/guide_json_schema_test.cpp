// guide/json_schema: grammars from JSON Schemas. Random sentences of each grammar must parse as
// JSON and be valid against the schema, checked twice: by a small validator written here from the
// JSON Schema rules (not from the compiler), and by python-jsonschema through
// tools/guide_schema_check.py when that is installed. Invalid instances must be rejected, and
// unsupported keywords refused by name and path.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "error_of.h"
#include "guide/json_schema.h"
#include "guide/matcher.h"
#include "guide_sample.h"

namespace {

using Json = nlohmann::ordered_json;
using sluice::guide::Grammar;
using sluice::guide::Matcher;
using sluice::testing::expect_error_of;

std::shared_ptr<const Grammar> schema_grammar(const Json& schema) {
  return std::make_shared<const Grammar>(sluice::guide::json_schema_grammar(schema));
}

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view s) {
  Matcher m(g);
  return m.accept_bytes(s) && m.can_end();
}

// --- An independent validator for the keywords the compiler supports. ---

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

bool is_integer(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  return v.is_number_float() && std::floor(v.get<double>()) == v.get<double>();
}

bool has_type(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") return is_integer(v);
  return false;
}

bool digits(const std::string& s, size_t at, size_t n) {
  for (size_t i = at; i < at + n; ++i)
    if (i >= s.size() || !isdigit(uint8_t(s[i]))) return false;
  return true;
}

bool valid_date(const std::string& s) {
  if (s.size() != 10 || !digits(s, 0, 4) || s[4] != '-' || !digits(s, 5, 2) || s[7] != '-' || !digits(s, 8, 2))
    return false;
  const int y = std::stoi(s.substr(0, 4)), m = std::stoi(s.substr(5, 2)), d = std::stoi(s.substr(8, 2));
  const int days[] = {31, (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m >= 1 && m <= 12 && d >= 1 && d <= days[m - 1];
}

bool valid_time(const std::string& s) {
  if (s.size() < 9 || !digits(s, 0, 2) || s[2] != ':' || !digits(s, 3, 2) || s[5] != ':' || !digits(s, 6, 2)) return false;
  if (std::stoi(s.substr(0, 2)) > 23 || std::stoi(s.substr(3, 2)) > 59 || std::stoi(s.substr(6, 2)) > 60) return false;
  size_t i = 8;
  if (s[i] == '.') {
    const size_t start = ++i;
    while (i < s.size() && isdigit(uint8_t(s[i]))) ++i;
    if (i == start) return false;
  }
  if (s.substr(i) == "Z" || s.substr(i) == "z") return true;
  return s.size() - i == 6 && (s[i] == '+' || s[i] == '-') && digits(s, i + 1, 2) && s[i + 3] == ':' &&
         digits(s, i + 4, 2) && std::stoi(s.substr(i + 1, 2)) <= 23 && std::stoi(s.substr(i + 4, 2)) <= 59;
}

bool valid_format(const std::string& s, const std::string& f) {
  if (f == "date") return valid_date(s);
  if (f == "time") return valid_time(s);
  if (f == "date-time") {
    const size_t t = s.find_first_of("Tt");
    return t == 10 && valid_date(s.substr(0, 10)) && valid_time(s.substr(11));
  }
  if (f == "uuid") {
    if (s.size() != 36) return false;
    for (size_t i = 0; i < 36; ++i) {
      if (i == 8 || i == 13 || i == 18 || i == 23) {
        if (s[i] != '-') return false;
      } else if (!isxdigit(uint8_t(s[i]))) {
        return false;
      }
    }
    return true;
  }
  return false;
}

bool valid(const Json& v, const Json& s, const Json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    if (ref == "#") return valid(v, root, root);
    const size_t slash = ref.rfind('/');
    return valid(v, root[ref.substr(2, slash - 2)][ref.substr(slash + 1)], root);
  }
  if (s.contains("allOf"))
    for (const Json& a : s["allOf"])
      if (!valid(v, a, root)) return false;
  if (s.contains("anyOf")) {
    bool any = false;
    for (const Json& a : s["anyOf"]) any = any || valid(v, a, root);
    if (!any) return false;
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const Json& a : s["oneOf"]) n += valid(v, a, root);
    if (n != 1) return false;
  }
  if (s.contains("type")) {
    bool ok = false;
    for (const Json& t : s["type"].is_array() ? s["type"] : Json::array({s["type"]})) ok = ok || has_type(v, t);
    if (!ok) return false;
  }
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum")) {
    bool ok = false;
    for (const Json& e : s["enum"]) ok = ok || v == e;
    if (!ok) return false;
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const Json& r : s["required"])
        if (!v.contains(r.get<std::string>())) return false;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (s.contains("properties") && s["properties"].contains(it.key())) {
        if (!valid(it.value(), s["properties"][it.key()], root)) return false;
      } else if (s.contains("additionalProperties") && !valid(it.value(), s["additionalProperties"], root)) {
        return false;
      }
    }
  }
  if (v.is_array()) {
    const size_t k = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < k && !valid(v[i], s["prefixItems"][i], root)) return false;
      if (i >= k && s.contains("items") && !valid(v[i], s["items"], root)) return false;
    }
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
  }
  if (v.is_string()) {
    const std::string str = v;
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>()) return false;
    if (s.contains("format") && !valid_format(str, s["format"])) return false;
  }
  return true;
}

// --- Schemas exercised by the sampling tests. ---

std::vector<Json> sample_schemas() {
  return {
      Json::parse(R"({
        "type": "object",
        "title": "person", "description": "annotations are ignored",
        "properties": {
          "name": {"type": "string", "minLength": 1, "maxLength": 8},
          "age": {"type": "integer"},
          "height": {"type": "number"},
          "kind": {"enum": ["child", "adult", 3, null]},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 3},
          "address": {"type": "object", "properties": {"street": {"type": "string"}, "zip": {"type": "integer"}},
                      "required": ["zip"], "additionalProperties": false},
          "ok": {"type": "boolean"},
          "nothing": {"type": "null"}
        },
        "required": ["name", "kind"],
        "additionalProperties": false
      })"),
      Json::parse(R"({
        "$defs": {
          "Pet": {"type": "object", "properties": {"species": {"const": "cat"}, "lives": {"type": "integer"}},
                  "required": ["species"]},
          "Color": {"enum": ["red", "green"]}
        },
        "type": "object",
        "properties": {
          "pet": {"anyOf": [{"$ref": "#/$defs/Pet"}, {"type": "null"}], "default": null},
          "color": {"allOf": [{"$ref": "#/$defs/Color"}], "description": "pydantic style"},
          "maybe": {"type": ["string", "integer", "null"]}
        },
        "required": ["color"]
      })"),
      Json::parse(R"({
        "$defs": {"node": {"type": "object",
          "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
          "required": ["value", "children"], "additionalProperties": false}},
        "$ref": "#/$defs/node"
      })"),
      Json::parse(R"({
        "oneOf": [
          {"type": "object", "properties": {"shape": {"const": "circle"}, "r": {"type": "number"}},
           "required": ["shape", "r"], "additionalProperties": false},
          {"type": "object", "properties": {"shape": {"const": "square"}, "side": {"type": "number"}},
           "required": ["shape", "side"], "additionalProperties": false},
          {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
          {"type": "string"}
        ]
      })"),
      Json::parse(R"({
        "type": "object",
        "properties": {"day": {"type": "string", "format": "date"}, "at": {"type": "string", "format": "time"},
                       "when": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"}},
        "required": ["day", "at", "when", "id"]
      })"),
      Json::parse(R"({
        "type": "array",
        "prefixItems": [{"type": "string"}, {"type": "integer"}, {"type": "boolean"}],
        "items": false,
        "minItems": 2
      })"),
      Json::parse(R"({"type": "array", "prefixItems": [{"const": "head"}], "items": {"type": "number"},
                      "minItems": 3, "maxItems": 5})"),
      Json::parse(R"({"type": "object", "additionalProperties": {"type": "integer"}})"),
      Json::parse(R"({"type": "object", "properties": {"fixed": {"const": {"a": [1, 2.5, "x\n\"y\u00e9"], "b": null}}},
                      "required": ["fixed"]})"),
      Json::parse(R"({"description": "anything at all"})"),
      Json::parse(R"({"type": "string", "minLength": 2, "maxLength": 4})"),
  };
}

std::vector<std::string> samples_of(const Json& schema, int count, uint64_t seed) {
  const Grammar g = sluice::guide::json_schema_grammar(schema);
  sluice::guide::testing::Sampler sampler(g, seed);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(sampler.sentence(120));
  return out;
}

TEST(GuideJsonSchema, SampledSentencesAreValidJsonForTheSchema) {
  int n = 0;
  for (const Json& schema : sample_schemas()) {
    auto g = schema_grammar(schema);
    for (const std::string& s : samples_of(schema, 300, 1000 + n++)) {
      ASSERT_TRUE(accepts(g, s)) << "the matcher rejects a sentence of its own grammar: " << s;
      Json v;
      try {
        v = Json::parse(s);
      } catch (const std::exception& e) {
        FAIL() << "not JSON: " << s << " (" << e.what() << ")\nschema: " << schema.dump();
      }
      ASSERT_TRUE(valid(v, schema, schema)) << "invalid against the schema: " << s << "\nschema: " << schema.dump();
    }
  }
}

TEST(GuideJsonSchema, SampledSentencesPassPythonJsonschema) {
  if (std::system("python3 -c 'import jsonschema' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with jsonschema is not installed";
#ifdef SLUICE_SOURCE_DIR
  const std::filesystem::path script = std::filesystem::path(SLUICE_SOURCE_DIR) / "tools/guide_schema_check.py";
  ASSERT_TRUE(std::filesystem::exists(script)) << script;
#else
  // A direct compile: __FILE__ is as given to the compiler, relative to where it ran.
  const std::filesystem::path script = std::filesystem::path(__FILE__).parent_path() / "../../tools/guide_schema_check.py";
  if (!std::filesystem::exists(script)) GTEST_SKIP() << "no " << script << " (define SLUICE_SOURCE_DIR)";
#endif
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("guide_schema_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  int n = 0;
  for (const Json& schema : sample_schemas()) {
    const auto schema_path = dir / ("schema" + std::to_string(n) + ".json");
    const auto samples_path = dir / ("samples" + std::to_string(n) + ".jsonl");
    std::ofstream(schema_path) << schema.dump();
    {
      std::ofstream out(samples_path);
      // Raw newlines only occur as whitespace between tokens, so a space keeps the document.
      for (std::string s : samples_of(schema, 300, 5000 + n)) {
        for (char& c : s)
          if (c == '\n') c = ' ';
        out << s << "\n";
      }
    }
    const std::string cmd = "python3 '" + script.string() + "' '" + schema_path.string() + "' '" +
                            samples_path.string() + "' > '" + (dir / "out.txt").string() + "' 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream in(dir / "out.txt");
    const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(rc, 0) << "schema " << n << ": " << schema.dump() << "\n" << report;
    ++n;
  }
  std::filesystem::remove_all(dir);
}

TEST(GuideJsonSchema, InvalidInstancesAreRejected) {
  auto person = schema_grammar(sample_schemas()[0]);
  EXPECT_TRUE(accepts(person, R"({"name": "Al", "kind": "adult"})"));
  EXPECT_TRUE(accepts(person, "{\n  \"name\": \"Al\",\n  \"age\": -3,\n  \"kind\": null\n}"));
  EXPECT_FALSE(accepts(person, R"({"kind": "adult"})")) << "required property missing";
  EXPECT_FALSE(accepts(person, R"({"name": "Al"})")) << "required property missing";
  EXPECT_FALSE(accepts(person, R"({"name": 5, "kind": "adult"})")) << "wrong type";
  EXPECT_FALSE(accepts(person, R"({"name": "Al", "age": 1.5, "kind": "adult"})")) << "integer";
  EXPECT_FALSE(accepts(person, R"({"name": "Al", "kind": "elder"})")) << "outside the enum";
  EXPECT_FALSE(accepts(person, R"({"name": "Al", "kind": "adult", "extra": 1})")) << "additionalProperties false";
  EXPECT_FALSE(accepts(person, R"({"name": "", "kind": 3})")) << "minLength";
  EXPECT_FALSE(accepts(person, R"({"name": "abcdefghi", "kind": 3})")) << "maxLength";
  EXPECT_TRUE(accepts(person, R"({"name": "\u00e9\n", "kind": 3})"));
  EXPECT_FALSE(accepts(person, R"({"name": "a)" "\x01" R"(", "kind": 3})")) << "raw control character";
  EXPECT_FALSE(accepts(person, R"({"name": "\ud800", "kind": 3})")) << "lone surrogate escape";
  EXPECT_TRUE(accepts(person, R"({"name": "\ud83d\ude00", "kind": 3})"));
  EXPECT_FALSE(accepts(person, R"({"name": "a", "kind": 3, "tags": ["a", "b", "c", "d"]})")) << "maxItems";
  EXPECT_FALSE(accepts(person, R"({"name": "a", "kind": 3, "address": {"street": "x"}})")) << "nested required";
  EXPECT_FALSE(accepts(person, R"({"name": "a", "kind": 3, "ok": 1})"));
  EXPECT_FALSE(accepts(person, R"({"name": "a", "kind": 3})" "\n")) << "no whitespace after the root";
  EXPECT_FALSE(accepts(person, R"({"name": "a",   "kind": 3})")) << "at most one space unless after a newline";

  auto shapes = schema_grammar(sample_schemas()[3]);
  EXPECT_TRUE(accepts(shapes, R"({"shape": "circle", "r": 1e-3})"));
  EXPECT_FALSE(accepts(shapes, R"({"shape": "circle", "side": 2})"));
  EXPECT_FALSE(accepts(shapes, R"([])")) << "minItems";
  EXPECT_FALSE(accepts(shapes, R"([1, 2, 3])")) << "maxItems";
  EXPECT_FALSE(accepts(shapes, "012")) << "leading zero";
  auto dates = schema_grammar(sample_schemas()[4]);
  const std::string ok = R"({"day": "2024-02-28", "at": "23:59:59.5Z", "when": "2024-12-31T00:00:00+05:30", )"
                         R"("id": "123e4567-e89b-12d3-a456-426614174000"})";
  EXPECT_TRUE(accepts(dates, ok));
  for (const char* bad : {"2024-02-30", "2024-13-01", "2024-04-31", "24-01-01"}) {
    std::string s = ok;
    s.replace(s.find("2024-02-28"), 10, bad);
    EXPECT_FALSE(accepts(dates, s)) << bad;
  }
}

TEST(GuideJsonSchema, AnyObjectGrammar) {
  auto g = std::make_shared<const Grammar>(sluice::guide::json_any_object_grammar());
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_TRUE(accepts(g, R"({"a": [1, {"b": null}, "c", true, -0.5e+10], "d": {}})"));
  EXPECT_FALSE(accepts(g, "[1]"));
  EXPECT_FALSE(accepts(g, R"("x")"));
  EXPECT_FALSE(accepts(g, R"({"a": 1,})"));
  EXPECT_FALSE(accepts(g, R"({"a": 01})"));
  EXPECT_FALSE(accepts(g, R"({"a": 1.})"));
  EXPECT_FALSE(accepts(g, R"({"a": 12345678901234567})")) << "17 integer digits";
  EXPECT_FALSE(accepts(g, R"({'a': 1})"));
  // Deep nesting is fine: the recognizer is pushdown.
  std::string deep = "{\"a\":";
  for (int i = 0; i < 100; ++i) deep += "[";
  for (int i = 0; i < 100; ++i) deep += "]";
  EXPECT_TRUE(accepts(g, deep + "}"));
}

TEST(GuideJsonSchema, RequiredButUndeclaredPropertiesFollowAdditionalProperties) {
  auto g = schema_grammar(Json::parse(R"({"type": "object", "required": ["id"], "additionalProperties": {"type": "integer"}})"));
  EXPECT_TRUE(accepts(g, R"({"id": 3})"));
  EXPECT_FALSE(accepts(g, R"({"id": "x"})"));
  EXPECT_FALSE(accepts(g, R"({})"));
  EXPECT_EQ(expect_error_of([] {
              sluice::guide::json_schema_grammar(Json::parse(R"({"type": "object", "properties": {"a": {}},
                  "required": ["b"], "additionalProperties": false})"));
            }),
            "json schema: required property 'b' is not allowed by 'additionalProperties' false at /");
  // An optional property that no value satisfies is never written, and nothing else is either.
  auto none = schema_grammar(Json::parse(R"({"type": "object", "properties": {"x": false}})"));
  EXPECT_TRUE(accepts(none, "{}"));
  EXPECT_FALSE(accepts(none, R"({"x": 1})"));
}

TEST(GuideJsonSchema, PropertiesComeInDeclaredOrder) {
  auto g = schema_grammar(Json::parse(R"({"type": "object", "properties": {"z": {"type": "integer"},
      "a": {"type": "integer"}, "m": {"type": "integer"}}, "required": ["m"]})"));
  EXPECT_TRUE(accepts(g, R"({"z": 1, "a": 2, "m": 3})"));
  EXPECT_TRUE(accepts(g, R"({"a": 2, "m": 3})"));
  EXPECT_TRUE(accepts(g, R"({"m": 3})"));
  EXPECT_FALSE(accepts(g, R"({"a": 2, "z": 1, "m": 3})"));
  EXPECT_FALSE(accepts(g, R"({"z": 1})"));
  EXPECT_FALSE(accepts(g, R"({})"));
}

TEST(GuideJsonSchema, PrefixedRulesComposeIntoALargerGrammar) {
  const Json weather = Json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})");
  const Json sum = Json::parse(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                                   "required": ["a", "b"], "additionalProperties": false})");
  // A tool-call syntax around the arguments, with special tokens as terminals.
  const std::string text = "root ::= <[100]> ( \"weather \" w-root | \"sum \" s-root ) <[101]>\n" +
                           sluice::guide::json_schema_gbnf(weather, "w-") + sluice::guide::json_schema_gbnf(sum, "s-");
  auto g = std::make_shared<const Grammar>(sluice::guide::parse_gbnf(text));
  Matcher m(g);
  ASSERT_TRUE(m.accept_token_terminal(100));
  ASSERT_TRUE(m.accept_bytes(R"(sum {"a": 1, "b": 2})"));
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept_token_terminal(101));
  EXPECT_TRUE(m.finished());
  Matcher bad(g);
  ASSERT_TRUE(bad.accept_token_terminal(100));
  EXPECT_FALSE(bad.accept_bytes(R"(sum {"city": "x"})"));
  EXPECT_EQ(expect_error_of([&] { sluice::guide::json_schema_gbnf(sum, "bad prefix"); }),
            "json schema: rule prefix 'bad prefix' has a character outside [a-zA-Z0-9_-]");
}

TEST(GuideJsonSchema, RecursiveReferences) {
  auto g = schema_grammar(sample_schemas()[2]);
  EXPECT_TRUE(accepts(g, R"({"value": 1, "children": [{"value": 2, "children": []}, {"value": 3, "children": [
      {"value": 4, "children": []}]}]})"));
  EXPECT_FALSE(accepts(g, R"({"value": 1, "children": [{"value": 2}]})"));
  auto self = schema_grammar(Json::parse(R"({"type": "array", "items": {"$ref": "#"}})"));
  EXPECT_TRUE(accepts(self, "[[], [[]]]"));
  EXPECT_FALSE(accepts(self, "[1]"));
}

TEST(GuideJsonSchema, UnsupportedKeywordsAreRefusedByNameAndPath) {
  auto err = [](const char* schema) {
    return expect_error_of([&] { sluice::guide::json_schema_grammar(Json::parse(schema)); });
  };
  EXPECT_EQ(err(R"({"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}})"),
            "json schema: 'minimum' is not supported at /properties/age");
  EXPECT_EQ(err(R"({"type": "array", "items": {"type": "number", "multipleOf": 2}})"),
            "json schema: 'multipleOf' is not supported at /items");
  EXPECT_EQ(err(R"({"type": "string", "pattern": "^a+$"})"), "json schema: 'pattern' is not supported at /");
  EXPECT_EQ(err(R"({"not": {"type": "string"}})"), "json schema: 'not' is not supported at /");
  EXPECT_EQ(err(R"({"type": "array", "uniqueItems": true})"), "json schema: 'uniqueItems' true is not supported at /");
  EXPECT_EQ(err(R"({"$defs": {"a": {"if": {}}}, "$ref": "#/$defs/a"})"), "json schema: 'if' is not supported at /$defs/a");
  EXPECT_EQ(err(R"({"$ref": "#/$defs/missing"})"), "json schema: '$ref' to '#/$defs/missing' names no definition at /");
  EXPECT_EQ(err(R"({"$ref": "http://example.com/s.json"})"),
            "json schema: '$ref' to 'http://example.com/s.json' is not supported (only #, #/$defs/NAME and "
            "#/definitions/NAME) at /");
  EXPECT_EQ(err(R"({"allOf": [{"type": "string"}, {"maxLength": 3}]})"),
            "json schema: 'allOf' is supported only with exactly one schema at /");
  EXPECT_EQ(err(R"({"type": "string", "format": "email"})"),
            "json schema: 'format' \"email\" is not supported (date, time, date-time, uuid) at /");
  EXPECT_EQ(err(R"({"type": "strin"})"), "json schema: unknown type \"strin\" at /");
  EXPECT_EQ(err(R"({"type": "string", "enum": [1, 2]})"),
            "json schema: 'enum'/'const' leaves no value of the allowed types at /");
  EXPECT_EQ(err(R"({"properties": {"a~b/c": {"type": "object", "properties": {"x": false}, "required": ["x"]}}})"),
            "json schema: schema false matches nothing at /properties/a~0b~1c/properties/x");
  EXPECT_EQ(err(R"({"type": "string", "maxLength": 1, "minLength": 2})"),
            "json schema: 'maxLength' below 'minLength' matches nothing at /");
}

TEST(GuideJsonSchema, OneOfOnlyWhenAlternativesCannotOverlap) {
  auto err = [](const char* schema) {
    return expect_error_of([&] { sluice::guide::json_schema_grammar(Json::parse(schema)); });
  };
  EXPECT_EQ(err(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})"),
            "json schema: 'oneOf' alternatives 0 and 1 may both match a value (not supported) at /");
  EXPECT_EQ(err(R"({"oneOf": [{"type": "string"}, {"enum": ["a", 1]}]})"),
            "json schema: 'oneOf' alternatives 0 and 1 may both match a value (not supported) at /");
  EXPECT_EQ(err(R"({"oneOf": [{"type": "object", "properties": {"k": {"const": 1}}, "required": ["k"]},
                              {"type": "object", "properties": {"k": {"enum": [2, 1.0]}}, "required": ["k"]}]})"),
            "json schema: 'oneOf' alternatives 0 and 1 may both match a value (not supported) at /");
  // Without "type" an alternative accepts every non-object, so a tag does not separate them.
  EXPECT_NE(err(R"({"oneOf": [{"properties": {"k": {"const": 1}}, "required": ["k"]},
                              {"properties": {"k": {"const": 2}}, "required": ["k"]}]})"),
            "");
  EXPECT_NO_THROW(sluice::guide::json_schema_grammar(Json::parse(R"({"oneOf": [{"type": "integer"}, {"type": "string"},
      {"const": null}, {"enum": [true]}]})")));
  EXPECT_NO_THROW(sluice::guide::json_schema_grammar(Json::parse(R"({"oneOf": [{"const": "a"}, {"enum": ["b", "c"]}]})")));
}

TEST(GuideJsonSchema, PlainJsonSchemaSortsKeysButStaysValid) {
  // nlohmann::json sorts object keys, so the declared order is lost; the grammar is still valid.
  const nlohmann::json schema = nlohmann::json::parse(R"({"type": "object", "properties": {"b": {"type": "integer"},
      "a": {"type": "integer"}}, "required": ["a", "b"]})");
  auto g = std::make_shared<const Grammar>(sluice::guide::json_schema_grammar(schema));
  EXPECT_TRUE(accepts(g, R"({"a": 1, "b": 2})"));
}

}  // namespace
