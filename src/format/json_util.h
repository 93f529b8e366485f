// Reading JSON files and typed field access with errors that name the file, the field path and what
// was expected. Generic helpers for every parser of untrusted JSON (configs, indexes, manifests).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice::format {

// The deepest nesting of arrays and objects accepted in any JSON document the engine reads.
// nlohmann's dump, copy and comparison recurse once per level, so a value nested tens of
// thousands deep overflows a thread's stack; every parse refuses such input before a value
// exists, which keeps every later dump (messages, chat templates, responses) shallow.
inline constexpr size_t kMaxJsonDepth = 256;

// Byte offset of the '[' or '{' that opens nesting level `max_depth` + 1 in `text`, or npos when
// the text never nests deeper. An iterative scan of the bytes (brackets inside strings do not
// count); for text that is not valid JSON it is still an upper bound on what a parser would open.
size_t json_depth_overflow(std::string_view text, size_t max_depth = kMaxJsonDepth);

// Parses `text`; `where` (usually the file path) starts every error message. Rejects invalid JSON
// (naming the byte offset, line and column), a NUL byte anywhere (nlohmann would stop reading
// there and accept what came before), nesting deeper than kMaxJsonDepth and duplicate keys in any
// object (nlohmann would otherwise keep the last one silently).
nlohmann::json parse_json_text(std::string_view text, const std::string& where);

// For parsers that answer bad input their own way: the parsed value, or a discarded one when
// `text` is not valid JSON (a NUL byte included) or nests deeper than kMaxJsonDepth (then
// *too_deep is set, if given).
// The only other way JSON is parsed here; JsonT is nlohmann::json or nlohmann::ordered_json.
template <class JsonT>
JsonT parse_json_or_discarded(std::string_view text, bool* too_deep = nullptr) {
  bool deep = json_depth_overflow(text) != std::string_view::npos;
  if (too_deep) *too_deep = deep;
  if (deep || text.find('\0') != std::string_view::npos) return JsonT(JsonT::value_t::discarded);
  return JsonT::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// Reads and parses a JSON file; refuses files larger than `max_bytes`.
nlohmann::json read_json_file(const std::string& path, size_t max_bytes = size_t(1) << 30);

// Message prefix for `field` inside `where`: "cfg.json" + "a" -> "cfg.json: a", then
// "cfg.json: a" + "b" -> "cfg.json: a.b". Pass the result as `where` when descending into an object.
std::string field_where(const std::string& where, std::string_view field);

// Short description of a JSON value for messages: its type and a truncated dump.
std::string describe_json(const nlohmann::json& value);

// Required fields: throw sluice::Error naming the field when `obj` is not an object, the field is
// missing, or it has the wrong type. Integers must be JSON integers (3.0 is refused) within int64;
// numbers may be integers or reals but must be finite.
const nlohmann::json& get_field(const nlohmann::json& obj, std::string_view field, const std::string& where);
int64_t get_int(const nlohmann::json& obj, std::string_view field, const std::string& where);
// Same, and refuses zero and negative values naming the field.
int64_t get_positive_int(const nlohmann::json& obj, std::string_view field, const std::string& where);
double get_number(const nlohmann::json& obj, std::string_view field, const std::string& where);
bool get_bool(const nlohmann::json& obj, std::string_view field, const std::string& where);
std::string get_string(const nlohmann::json& obj, std::string_view field, const std::string& where);
const nlohmann::json& get_object(const nlohmann::json& obj, std::string_view field, const std::string& where);
const nlohmann::json& get_array(const nlohmann::json& obj, std::string_view field, const std::string& where);
std::vector<int64_t> get_int_list(const nlohmann::json& obj, std::string_view field, const std::string& where);
std::vector<double> get_number_list(const nlohmann::json& obj, std::string_view field, const std::string& where);
std::vector<std::string> get_string_list(const nlohmann::json& obj, std::string_view field, const std::string& where);

// Optional fields: a missing field or JSON null gives the default; a present field of the wrong
// type is still an error.
bool has_field(const nlohmann::json& obj, std::string_view field);  // present and not null
int64_t get_int_or(const nlohmann::json& obj, std::string_view field, int64_t fallback, const std::string& where);
double get_number_or(const nlohmann::json& obj, std::string_view field, double fallback, const std::string& where);
bool get_bool_or(const nlohmann::json& obj, std::string_view field, bool fallback, const std::string& where);
std::string get_string_or(const nlohmann::json& obj, std::string_view field, const std::string& fallback,
                          const std::string& where);

// Conversions of a value already in hand (an array element, say); `where` names it fully.
int64_t as_int(const nlohmann::json& value, const std::string& where);
double as_number(const nlohmann::json& value, const std::string& where);

// Another name transformers writes a config field under (its configs' attribute_map: transformers 5
// saves Qwen3-MoE's num_experts as num_local_experts, say). Each architecture's parser lists its
// own; apply_field_aliases copies an alias that is present into its field when the field is absent,
// and refuses a config that gives both with different values.
struct FieldAlias {
  std::string_view field, alias;
};
void apply_field_aliases(nlohmann::json& root, std::span<const FieldAlias> aliases, const std::string& where);

// config.json's model_type in a model directory ("" when it has none).
std::string read_model_type(const std::string& dir);

}  // namespace sluice::format
