// Typed JSON field access and file reading with messages that name the file, the field and what
// was expected.
#include "format/json_util.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "core/error.h"

namespace sluice::format {

using nlohmann::json;

namespace {

// Line and column (1-based) of byte `offset` in `text`, for parse errors in multi-line files.
void line_column(std::string_view text, size_t offset, size_t* line, size_t* column) {
  *line = 1;
  *column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++*line;
      *column = 1;
    } else {
      ++*column;
    }
  }
}

// nlohmann's messages start with "[json.exception.parse_error.101] parse error at line 1, column 2: ";
// keep only the part that says what was wrong, since we report the position ourselves.
std::string parse_reason(const char* what) {
  std::string_view s(what);
  size_t colon = s.find(": ");
  if (colon != std::string_view::npos) s.remove_prefix(colon + 2);
  return std::string(s);
}

const char* type_word(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a real number";
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "a discarded value";
  }
  return "an unknown value";
}

[[noreturn]] void wrong_type(const json& value, const std::string& where, const char* expected) {
  fail(where, ": expected ", expected, ", got ", describe_json(value));
}

// SAX handler that only tracks the keys of each open object and remembers the first repeated one.
struct DuplicateKeyFinder : json::json_sax_t {
  std::vector<std::unordered_set<std::string>> open_objects;
  std::string duplicate;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_objects.emplace_back();
    return true;
  }
  bool key(string_t& name) override {
    if (!open_objects.back().insert(name).second) {
      duplicate = name;
      return false;  // stop at the first one
    }
    return true;
  }
  bool end_object() override {
    open_objects.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

}  // namespace

size_t json_depth_overflow(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

std::string describe_json(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return cat(type_word(value), " (", text, ")");
}

json parse_json_text(std::string_view text, const std::string& where) {
  // nlohmann stops at a NUL byte as if the text ended there, so "{}\0<anything>" would parse as {}
  // with the rest unread. No JSON text holds a raw NUL (inside strings it must be \u0000).
  if (size_t at = text.find('\0'); at != std::string_view::npos) {
    size_t line = 0, column = 0;
    line_column(text, at, &line, &column);
    fail(where, ": invalid JSON at byte ", at, " (line ", line, ", column ", column,
         "): a NUL byte (JSON text cannot contain one)");
  }
  if (size_t at = json_depth_overflow(text); at != std::string_view::npos) {
    size_t line = 0, column = 0;
    line_column(text, at, &line, &column);
    fail(where, ": JSON nested deeper than the limit of ", kMaxJsonDepth, " levels at byte ", at, " (line ", line,
         ", column ", column, ")");
  }
  json result;
  try {
    result = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    size_t line = 0, column = 0;
    line_column(text, offset, &line, &column);
    fail(where, ": invalid JSON at byte ", offset, " (line ", line, ", column ", column, "): ", parse_reason(e.what()));
  } catch (const json::exception& e) {
    fail(where, ": invalid JSON: ", parse_reason(e.what()));
  }
  // A second, event-only pass for duplicate keys. (nlohmann's parser callback could do it in one
  // pass, but it rescans the parent at the end of every object: quadratic in the tensor count.)
  DuplicateKeyFinder finder;
  json::sax_parse(text.begin(), text.end(), &finder);
  if (!finder.duplicate.empty()) fail(where, ": duplicate key \"", finder.duplicate, "\" in a JSON object");
  return result;
}

json read_json_file(const std::string& path, size_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(path, ": cannot open: ", std::strerror(errno));
  std::string text;
  char buf[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (text.size() + got > max_bytes) {
      std::fclose(f);
      fail(path, ": larger than the limit of ", max_bytes, " bytes for a JSON file");
    }
    text.append(buf, got);
  }
  bool read_error = std::ferror(f);
  int err = errno;
  std::fclose(f);
  if (read_error) fail(path, ": read error: ", std::strerror(err));
  return parse_json_text(text, path);
}

std::string field_where(const std::string& where, std::string_view field) {
  // A field path already started after the file name (after its last '/') continues with '.'.
  size_t slash = where.rfind('/');
  size_t sep = where.find(": ", slash == std::string::npos ? 0 : slash);
  if (sep != std::string::npos) return cat(where, ".", field);
  return cat(where, ": ", field);
}

bool has_field(const json& obj, std::string_view field) {
  if (!obj.is_object()) return false;
  auto it = obj.find(field);
  return it != obj.end() && !it->is_null();
}

const json& get_field(const json& obj, std::string_view field, const std::string& where) {
  if (!obj.is_object()) wrong_type(obj, where, "an object");
  auto it = obj.find(field);
  if (it == obj.end()) fail(field_where(where, field), ": missing");
  return *it;
}

int64_t as_int(const json& value, const std::string& where) {
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) fail(where, ": integer ", u, " is too large");
    return int64_t(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  wrong_type(value, where, "an integer");
}

double as_number(const json& value, const std::string& where) {
  if (!value.is_number()) wrong_type(value, where, "a number");
  double d = value.get<double>();
  if (!std::isfinite(d)) fail(where, ": expected a finite number, got ", d);
  return d;
}

int64_t get_int(const json& obj, std::string_view field, const std::string& where) {
  return as_int(get_field(obj, field, where), field_where(where, field));
}

double get_number(const json& obj, std::string_view field, const std::string& where) {
  return as_number(get_field(obj, field, where), field_where(where, field));
}

bool get_bool(const json& obj, std::string_view field, const std::string& where) {
  const json& v = get_field(obj, field, where);
  if (!v.is_boolean()) wrong_type(v, field_where(where, field), "true or false");
  return v.get<bool>();
}

std::string get_string(const json& obj, std::string_view field, const std::string& where) {
  const json& v = get_field(obj, field, where);
  if (!v.is_string()) wrong_type(v, field_where(where, field), "a string");
  return v.get<std::string>();
}

const json& get_object(const json& obj, std::string_view field, const std::string& where) {
  const json& v = get_field(obj, field, where);
  if (!v.is_object()) wrong_type(v, field_where(where, field), "an object");
  return v;
}

const json& get_array(const json& obj, std::string_view field, const std::string& where) {
  const json& v = get_field(obj, field, where);
  if (!v.is_array()) wrong_type(v, field_where(where, field), "an array");
  return v;
}

std::vector<int64_t> get_int_list(const json& obj, std::string_view field, const std::string& where) {
  const json& arr = get_array(obj, field, where);
  std::string at = field_where(where, field);
  std::vector<int64_t> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) out.push_back(as_int(arr[i], cat(at, "[", i, "]")));
  return out;
}

std::vector<double> get_number_list(const json& obj, std::string_view field, const std::string& where) {
  const json& arr = get_array(obj, field, where);
  std::string at = field_where(where, field);
  std::vector<double> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) out.push_back(as_number(arr[i], cat(at, "[", i, "]")));
  return out;
}

std::vector<std::string> get_string_list(const json& obj, std::string_view field, const std::string& where) {
  const json& arr = get_array(obj, field, where);
  std::string at = field_where(where, field);
  std::vector<std::string> out;
  out.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    if (!arr[i].is_string()) wrong_type(arr[i], cat(at, "[", i, "]"), "a string");
    out.push_back(arr[i].get<std::string>());
  }
  return out;
}

int64_t get_int_or(const json& obj, std::string_view field, int64_t fallback, const std::string& where) {
  if (!obj.is_object()) wrong_type(obj, where, "an object");
  return has_field(obj, field) ? get_int(obj, field, where) : fallback;
}

double get_number_or(const json& obj, std::string_view field, double fallback, const std::string& where) {
  if (!obj.is_object()) wrong_type(obj, where, "an object");
  return has_field(obj, field) ? get_number(obj, field, where) : fallback;
}

bool get_bool_or(const json& obj, std::string_view field, bool fallback, const std::string& where) {
  if (!obj.is_object()) wrong_type(obj, where, "an object");
  return has_field(obj, field) ? get_bool(obj, field, where) : fallback;
}

std::string get_string_or(const json& obj, std::string_view field, const std::string& fallback,
                          const std::string& where) {
  if (!obj.is_object()) wrong_type(obj, where, "an object");
  return has_field(obj, field) ? get_string(obj, field, where) : fallback;
}

int64_t get_positive_int(const nlohmann::json& obj, std::string_view field, const std::string& where) {
  int64_t v = get_int(obj, field, where);
  if (v <= 0) fail(where, ": field '", std::string(field), "' must be positive, got ", v);
  return v;
}

std::string read_model_type(const std::string& dir) {
  std::string path = dir + "/config.json";
  nlohmann::json root = read_json_file(path);
  if (!root.is_object()) fail(path, ": expected a JSON object");
  return get_string_or(root, "model_type", "", path);
}

void apply_field_aliases(nlohmann::json& root, std::span<const FieldAlias> aliases, const std::string& where) {
  if (!root.is_object()) return;
  for (const FieldAlias& a : aliases) {
    if (!has_field(root, a.alias)) continue;
    const std::string field(a.field), alias(a.alias);
    if (!has_field(root, field)) {
      root[field] = root[alias];
    } else if (root[field] != root[alias]) {
      fail(where, ": fields '", field, "' (", describe_json(root[field]), ") and '", alias, "' (",
           describe_json(root[alias]), ") are two names of one setting and disagree");
    }
  }
}

}  // namespace sluice::format
