// libFuzzer target for the JSON depth scanner (format/json_util): on any NUL-free text that nlohmann's
// (non-recursive) SAX parser accepts, json_depth_overflow must report an overflow exactly when the
// document nests deeper than the limit, at a byte that opens an array or object; parse_json_text
// may only return a value or throw sluice::Error. The first input byte picks a small limit.
// fuzz-sources: src/format/json_util.cpp src/core/regular_file.cpp
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/error.h"
#include "format/json_util.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

// Deepest nesting of arrays and objects, counted by SAX events (no recursion over the value).
struct DepthCounter : nlohmann::json_sax<nlohmann::json> {
  size_t depth = 0, max_depth = 0;
  bool open() {
    if (++depth > max_depth) max_depth = depth;
    return true;
  }
  bool close() {
    --depth;
    return true;
  }
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return open(); }
  bool key(string_t&) override { return true; }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  using namespace sluice::format;
  if (size == 0) return 0;
  const size_t limit = data[0] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t at = json_depth_overflow(text, limit);
  if (at != std::string_view::npos) check(at < text.size() && (text[at] == '[' || text[at] == '{'));
  const size_t at_default = json_depth_overflow(text);
  if (at_default != std::string_view::npos) check(text[at_default] == '[' || text[at_default] == '{');

  // nlohmann stops reading at a NUL byte, so only NUL-free text is compared (the scanner reads all
  // of it; parse_json_text refuses any NUL).
  DepthCounter sax;
  const bool valid =
      text.find('\0') == std::string_view::npos && nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
  if (valid) {
    check((sax.max_depth > limit) == (at != std::string_view::npos));
    check((sax.max_depth > kMaxJsonDepth) == (at_default != std::string_view::npos));
  }
  try {
    nlohmann::json j = parse_json_text(text, "fuzz.json");
    check(valid && sax.max_depth <= kMaxJsonDepth);
    (void)j.dump();
  } catch (const Error&) {
  }
  return 0;
}
