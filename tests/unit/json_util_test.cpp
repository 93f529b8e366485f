// JSON helpers: parse errors with positions, duplicate keys, and typed getters whose errors name
// the file and the field path.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "error_of.h"
#include "format/json_util.h"

namespace sluice::format {
namespace {

using nlohmann::json;

using testing::expect_error_of;

#define EXPECT_CONTAINS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST(JsonUtil, ParseErrorNamesPosition) {
  std::string msg = expect_error_of([] { parse_json_text("{\n  \"a\": 1,\n  \"b\": tru\n}", "cfg.json"); });
  EXPECT_CONTAINS(msg, "cfg.json: invalid JSON at byte");
  EXPECT_CONTAINS(msg, "line 3");
  msg = expect_error_of([] { parse_json_text("", "cfg.json"); });
  EXPECT_CONTAINS(msg, "cfg.json: invalid JSON");
  msg = expect_error_of([] { parse_json_text("{\"a\": NaN}", "cfg.json"); });  // Python's json.dump can write this
  EXPECT_CONTAINS(msg, "cfg.json: invalid JSON");
  msg = expect_error_of([] { parse_json_text("\"\xff\"", "cfg.json"); });
  EXPECT_CONTAINS(msg, "cfg.json: invalid JSON");
}

// nlohmann ends its input at a NUL byte; found by the json_depth_fuzz target (the scanner saw a
// '{' after the NUL that nlohmann never read). Text after a NUL must not be silently dropped.
TEST(JsonUtil, NulByteIsRefusedWhereverItIs) {
  using namespace std::string_literals;
  std::string msg = expect_error_of([] { parse_json_text("{\"a\":1}\0{\"b\":"s, "req.json"); });
  EXPECT_CONTAINS(msg, "req.json: invalid JSON at byte 7 (line 1, column 8): a NUL byte");
  msg = expect_error_of([] { parse_json_text("\0"s, "req.json"); });
  EXPECT_CONTAINS(msg, "req.json: invalid JSON at byte 0");
  bool deep = true;
  EXPECT_TRUE(parse_json_or_discarded<json>("[1]\0]"s, &deep).is_discarded());
  EXPECT_FALSE(deep);
  EXPECT_EQ(parse_json_text("\"\\u0000\"", "req.json"), json(std::string(1, '\0')));  // escaped NUL is fine
}

TEST(JsonUtil, DuplicateKeysRejectedAtAnyDepth) {
  EXPECT_CONTAINS(expect_error_of([] { parse_json_text(R"({"a":1,"a":2})", "f"); }), "duplicate key \"a\"");
  EXPECT_CONTAINS(expect_error_of([] { parse_json_text(R"({"x":[{"b":1},{"c":1,"c":2}]})", "f"); }), "duplicate key \"c\"");
  // The same key in sibling objects is fine.
  json ok = parse_json_text(R"({"x":{"a":1},"y":{"a":2},"z":[{"a":3},{"a":4}]})", "f");
  EXPECT_EQ(ok["z"][1]["a"], 4);
}

// Nesting `depth` arrays deep around `core`: "[[[core]]]".
std::string nested(size_t depth, const std::string& core = "1") {
  return std::string(depth, '[') + core + std::string(depth, ']');
}

TEST(JsonUtil, DepthLimitCountsBracketsOutsideStrings) {
  EXPECT_EQ(json_depth_overflow(nested(kMaxJsonDepth)), std::string_view::npos);
  EXPECT_EQ(json_depth_overflow(nested(kMaxJsonDepth + 1)), kMaxJsonDepth);  // the bracket that opens 257
  const std::string four = R"({"a":[1,{"b":[]}],"c":{}})";  // four levels deep, at byte 13
  EXPECT_EQ(json_depth_overflow(four, 4), std::string_view::npos);
  EXPECT_EQ(json_depth_overflow(four, 3), 13u);
  EXPECT_EQ(json_depth_overflow(four, 2), 8u);
  // Brackets and escaped quotes inside strings are text, not nesting.
  std::string in_string = "[\"" + std::string(1000, '[') + "\\\"{{{\"]";
  EXPECT_EQ(json_depth_overflow(in_string), std::string_view::npos);
  EXPECT_EQ(parse_json_text(in_string, "f").at(0).get<std::string>(), std::string(1000, '[') + "\"{{{");
  // Closing brackets with nothing open never make the count negative (and so never hide depth).
  EXPECT_EQ(json_depth_overflow("]]]]" + nested(kMaxJsonDepth + 1)), 4 + kMaxJsonDepth);
}

TEST(JsonUtil, DeepDocumentsAreRefusedBeforeAnyValueExists) {
  json ok = parse_json_text(nested(kMaxJsonDepth), "f");
  EXPECT_TRUE(ok.is_array());
  // 100,000 levels (a config.json that used to crash `run`): one line naming the limit and where.
  std::string msg = expect_error_of([] { parse_json_text("{\"a\":" + nested(100000) + "}", "config.json"); });
  EXPECT_CONTAINS(msg, "config.json: JSON nested deeper than the limit of 256 levels at byte 260 (line 1, column 261)");
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_LT(msg.size(), 200u);
  std::string objects;
  for (int i = 0; i < 50000; ++i) objects += "{\"k\":";
  EXPECT_CONTAINS(expect_error_of([&] { parse_json_text(objects, "f"); }), "deeper than the limit of 256 levels");
  // The non-throwing form used by the tokenizer and the server: discarded, and says why.
  bool too_deep = false;
  EXPECT_TRUE(parse_json_or_discarded<nlohmann::ordered_json>(nested(30000), &too_deep).is_discarded());
  EXPECT_TRUE(too_deep);
  EXPECT_TRUE(parse_json_or_discarded<json>("[1,", &too_deep).is_discarded());
  EXPECT_FALSE(too_deep);
  EXPECT_EQ(parse_json_or_discarded<json>(nested(kMaxJsonDepth), &too_deep).dump(), nested(kMaxJsonDepth));
  EXPECT_FALSE(too_deep);
}

TEST(JsonUtil, ReadFile) {
  std::string dir = (std::filesystem::temp_directory_path() / ("sluice-json-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  std::string path = dir + "/config.json";
  {
    std::ofstream out(path);
    out << R"({"hidden_size": 64, "text_config": {"vocab_size": 100}})";
  }
  json cfg = read_json_file(path);
  EXPECT_EQ(get_int(cfg, "hidden_size", path), 64);
  EXPECT_CONTAINS(expect_error_of([&] { read_json_file(path, 10); }), "larger than the limit");
  EXPECT_CONTAINS(expect_error_of([&] { read_json_file(dir + "/absent.json"); }), dir + "/absent.json: cannot open");
  {
    std::ofstream out(path);
    out << "{\"a\": }";
  }
  EXPECT_CONTAINS(expect_error_of([&] { read_json_file(path); }), path + ": invalid JSON at byte 6 (line 1, column 7)");
  std::filesystem::remove_all(dir);
}

TEST(JsonUtil, FieldWhere) {
  EXPECT_EQ(field_where("/m/config.json", "text_config"), "/m/config.json: text_config");
  EXPECT_EQ(field_where("/m/config.json: text_config", "rope"), "/m/config.json: text_config.rope");
  EXPECT_EQ(field_where("/a: b/config.json", "x"), "/a: b/config.json: x");
}

TEST(JsonUtil, TypedGetters) {
  json cfg = parse_json_text(R"({"n": 7, "big": 18446744073709551615, "neg": -3, "r": 1e-6, "f": 3.0,
      "t": true, "s": "silu", "nul": null, "ids": [1, 2, 3], "xs": [0.5, 2], "names": ["a", "b"],
      "sub": {"k": 5}})",
                             "cfg.json");
  const std::string w = "cfg.json";
  EXPECT_EQ(get_int(cfg, "n", w), 7);
  EXPECT_EQ(get_int(cfg, "neg", w), -3);
  EXPECT_DOUBLE_EQ(get_number(cfg, "r", w), 1e-6);
  EXPECT_DOUBLE_EQ(get_number(cfg, "n", w), 7.0);
  EXPECT_TRUE(get_bool(cfg, "t", w));
  EXPECT_EQ(get_string(cfg, "s", w), "silu");
  EXPECT_EQ(get_int_list(cfg, "ids", w), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(get_number_list(cfg, "xs", w), (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(get_string_list(cfg, "names", w), (std::vector<std::string>{"a", "b"}));
  const json& sub = get_object(cfg, "sub", w);
  EXPECT_EQ(get_int(sub, "k", field_where(w, "sub")), 5);
  EXPECT_EQ(get_array(cfg, "ids", w).size(), 3u);

  EXPECT_EQ(expect_error_of([&] { get_int(cfg, "missing", w); }), "cfg.json: missing: missing");
  EXPECT_EQ(expect_error_of([&] { get_int(sub, "hidden", field_where(w, "sub")); }), "cfg.json: sub.hidden: missing");
  EXPECT_EQ(expect_error_of([&] { get_int(cfg, "s", w); }), "cfg.json: s: expected an integer, got a string (\"silu\")");
  EXPECT_CONTAINS(expect_error_of([&] { get_int(cfg, "f", w); }), "cfg.json: f: expected an integer, got a real number");
  EXPECT_CONTAINS(expect_error_of([&] { get_int(cfg, "big", w); }),
                  "cfg.json: big: integer 18446744073709551615 is too large");
  EXPECT_CONTAINS(expect_error_of([&] { get_int(cfg, "nul", w); }), "cfg.json: nul: expected an integer, got null");
  EXPECT_CONTAINS(expect_error_of([&] { get_number(cfg, "s", w); }), "cfg.json: s: expected a number");
  EXPECT_CONTAINS(expect_error_of([&] { get_bool(cfg, "n", w); }), "cfg.json: n: expected true or false");
  EXPECT_CONTAINS(expect_error_of([&] { get_string(cfg, "n", w); }), "cfg.json: n: expected a string");
  EXPECT_CONTAINS(expect_error_of([&] { get_object(cfg, "ids", w); }), "cfg.json: ids: expected an object");
  EXPECT_CONTAINS(expect_error_of([&] { get_array(cfg, "sub", w); }), "cfg.json: sub: expected an array");
  EXPECT_CONTAINS(expect_error_of([&] { get_int_list(cfg, "xs", w); }), "cfg.json: xs[0]: expected an integer");
  EXPECT_CONTAINS(expect_error_of([&] { get_number_list(cfg, "names", w); }), "cfg.json: names[0]: expected a number");
  EXPECT_CONTAINS(expect_error_of([&] { get_string_list(cfg, "ids", w); }), "cfg.json: ids[0]: expected a string");
  EXPECT_CONTAINS(expect_error_of([&] { get_int(cfg["ids"], "x", "cfg.json: ids"); }), "cfg.json: ids: expected an object");
}

TEST(JsonUtil, NumbersMustBeFinite) {
  json cfg = {{"nan", std::numeric_limits<double>::quiet_NaN()}, {"inf", INFINITY}, {"list", {1.0, -INFINITY}}};
  EXPECT_CONTAINS(expect_error_of([&] { get_number(cfg, "nan", "c"); }), "c: nan: expected a finite number");
  EXPECT_CONTAINS(expect_error_of([&] { get_number(cfg, "inf", "c"); }), "c: inf: expected a finite number");
  EXPECT_CONTAINS(expect_error_of([&] { get_number_list(cfg, "list", "c"); }), "c: list[1]: expected a finite number");
  EXPECT_CONTAINS(expect_error_of([&] { get_number_or(cfg, "nan", 1.0, "c"); }), "c: nan: expected a finite number");
}

TEST(JsonUtil, OptionalGetters) {
  json cfg = parse_json_text(R"({"n": 7, "nul": null, "s": "x", "b": false, "r": 0.25})", "cfg.json");
  EXPECT_EQ(get_int_or(cfg, "n", 1, "cfg.json"), 7);
  EXPECT_EQ(get_int_or(cfg, "absent", 1, "cfg.json"), 1);
  EXPECT_EQ(get_int_or(cfg, "nul", 2, "cfg.json"), 2);
  EXPECT_DOUBLE_EQ(get_number_or(cfg, "r", 1.0, "cfg.json"), 0.25);
  EXPECT_DOUBLE_EQ(get_number_or(cfg, "absent", 1.5, "cfg.json"), 1.5);
  EXPECT_FALSE(get_bool_or(cfg, "b", true, "cfg.json"));
  EXPECT_TRUE(get_bool_or(cfg, "absent", true, "cfg.json"));
  EXPECT_EQ(get_string_or(cfg, "s", "d", "cfg.json"), "x");
  EXPECT_EQ(get_string_or(cfg, "absent", "d", "cfg.json"), "d");
  EXPECT_TRUE(has_field(cfg, "n"));
  EXPECT_FALSE(has_field(cfg, "nul"));
  EXPECT_FALSE(has_field(cfg, "absent"));
  // Present with the wrong type is an error, not the default.
  EXPECT_CONTAINS(expect_error_of([&] { get_int_or(cfg, "s", 1, "cfg.json"); }), "cfg.json: s: expected an integer");
  EXPECT_CONTAINS(expect_error_of([&] { get_bool_or(cfg, "n", true, "cfg.json"); }), "cfg.json: n: expected true or false");
  EXPECT_CONTAINS(expect_error_of([&] { get_string_or(json::array(), "s", "", "cfg.json"); }), "cfg.json: expected an object");
}

}  // namespace
}  // namespace sluice::format
