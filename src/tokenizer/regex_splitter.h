// Pre-tokeniser regular expressions: PCRE2 (UTF, UCP, JIT) wrapper that walks a text's matches,
// with the Unicode spellings of \s / \S used by Rust's regex and Oniguruma substituted in.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

namespace sluice::tokenizer {

class RegexSplitter {
 public:
  // `what` names the pattern's source for error messages (file and field).
  RegexSplitter(const std::string& pattern, const std::string& what);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // Calls on_match(begin, end) for each non-empty leftmost-first match in `text`, left to right;
  // an on_match that returns bool stops the walk by returning false. `text` must be valid UTF-8
  // (callers validate once). Thread-safe.
  template <typename OnMatch>
  void for_each_match(std::string_view text, OnMatch&& on_match) const {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t begin, end;
      if (!next_match(text, pos, begin, end)) break;
      if (end > begin) {
        if constexpr (std::is_same_v<std::invoke_result_t<OnMatch&, size_t, size_t>, bool>) {
          if (!on_match(begin, end)) return;
        } else {
          on_match(begin, end);
        }
      }
      pos = end > begin ? end : next_char(text, begin);
    }
  }

  // Rewrites \s and \S into the explicit Unicode White_Space class (PCRE2's \s differs slightly).
  static std::string translate(const std::string& pattern, const std::string& what);

 private:
  bool next_match(std::string_view text, size_t from, size_t& begin, size_t& end) const;
  static size_t next_char(std::string_view text, size_t pos);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::tokenizer
