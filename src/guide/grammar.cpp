// GBNF parser: text -> rules of alternatives -> flat byte-level Grammar. Classes over code points
// become generated rules of UTF-8 byte-range sequences; groups and repetitions become generated
// rules too, so the flat form only has bytes, tokens and rule references.
#include "guide/grammar.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <utility>

#include "core/error.h"
#include "core/utf8_encode.h"

namespace sluice::guide {

namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kMaxRepeat = 100000;

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive code point ranges
using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;   // one inclusive byte range per byte

// Sorted, merged, and without surrogates (no valid UTF-8 encodes them).
Ranges normalize(Ranges r) {
  Ranges cut;
  for (auto [lo, hi] : r) {
    if (lo <= 0xDFFF && hi >= 0xD800) {
      if (lo < 0xD800) cut.push_back({lo, 0xD7FF});
      if (hi > 0xDFFF) cut.push_back({0xE000, hi});
    } else {
      cut.push_back({lo, hi});
    }
  }
  std::sort(cut.begin(), cut.end());
  Ranges out;
  for (auto [lo, hi] : cut) {
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.push_back({lo, hi});
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize(out);
}

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Splits [lo, hi] (one encoded length) until every byte position ranges independently, so the
// product of the byte ranges is exactly the code points of the range.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  const int n = utf8_length(lo);
  if (utf8_length(hi) != n) {
    const uint32_t top = n == 1 ? 0x7F : n == 2 ? 0x7FF : 0xFFFF;
    utf8_sequences(lo, top, out);
    utf8_sequences(top + 1, hi, out);
    return;
  }
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  ByteSeq seq;
  for (int i = 0; i < n; ++i) seq.push_back({uint8_t(a[i]), uint8_t(b[i])});
  out.push_back(std::move(seq));
}

using Alt = std::vector<Element>;

struct RuleDraft {
  std::string name;
  std::vector<Alt> alts;
  bool defined = false;
  size_t first_use = 0;  // offset of the first reference, for "undefined rule"
  size_t def_at = 0;     // offset of the definition (or of the group that generated it)
  uint32_t origin = 0;   // the user rule a generated rule was written in
};

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Grammar run() {
    skip_space(true);
    while (pos_ < src_.size()) {
      const size_t at = pos_;
      const std::string name = parse_name();
      const uint32_t id = symbol(name, at);
      if (rules_[id].defined) error(at, "rule '", name, "' is defined twice");
      rules_[id].defined = true;
      rules_[id].def_at = at;
      skip_space(false);
      if (src_.substr(pos_, 3) != "::=") error(pos_, "expected '::=' after rule name '", name, "'");
      pos_ += 3;
      skip_space(true);
      rules_[id].alts = parse_alternatives(id, false);
      skip_space(false);
      if (pos_ < src_.size() && src_[pos_] != '\n' && src_[pos_] != '\r')
        error(pos_, "unexpected '", src_[pos_], "' in rule '", name, "'");
      skip_space(true);
    }
    for (const RuleDraft& r : rules_)
      if (!r.defined) error(r.first_use, "undefined rule '", r.name, "'");
    auto root = ids_.find("root");
    if (root == ids_.end()) error(src_.size(), "missing rule 'root'");
    check_left_recursion();
    return flatten(root->second);
  }

 private:
  template <typename... Parts>
  [[noreturn]] void error(size_t at, Parts&&... parts) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail("gbnf ", line, ":", col, ": ", std::forward<Parts>(parts)...);
  }

  static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else if (newlines && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (pos_ < src_.size() && word_char(src_[pos_])) ++pos_;
    if (pos_ == start) {
      if (pos_ < src_.size())
        error(pos_, "expected a rule name, found '", src_[pos_], "'");
      error(pos_, "expected a rule name");
    }
    return std::string(src_.substr(start, pos_ - start));
  }

  uint32_t symbol(const std::string& name, size_t at) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const uint32_t id = uint32_t(rules_.size());
    rules_.push_back({name, {}, false, at, at, id});
    ids_.emplace(name, id);
    return id;
  }

  uint32_t generated(uint32_t origin, size_t at, std::vector<Alt> alts) {
    const uint32_t id = uint32_t(rules_.size());
    rules_.push_back({rules_[origin].name + "~" + std::to_string(id), std::move(alts), true, at, at, origin});
    return id;
  }

  uint32_t byte_set(const ByteSet& s) {
    auto [it, added] = set_ids_.emplace(s, uint32_t(sets_.size()));
    if (added) sets_.push_back(s);
    return it->second;
  }

  Element byte_element(uint8_t lo, uint8_t hi) {
    ByteSet s;
    s.add_range(lo, hi);
    return {Op::Bytes, byte_set(s)};
  }

  std::vector<Alt> parse_alternatives(uint32_t rule, bool nested) {
    std::vector<Alt> alts;
    alts.push_back(parse_sequence(rule, nested));
    for (;;) {
      if (!nested) {
        // A top-level rule goes on when its next line starts with '|'.
        const size_t save = pos_;
        skip_space(true);
        if (pos_ >= src_.size() || src_[pos_] != '|') {
          pos_ = save;
          break;
        }
      }
      if (pos_ >= src_.size() || src_[pos_] != '|') break;
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(rule, nested));
    }
    return alts;
  }

  uint32_t hex_digits(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= src_.size()) error(pos_, "expected ", n, " hex digits");
      const char c = src_[pos_];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) error(pos_, "expected ", n, " hex digits, found '", c, "'");
      v = v * 16 + uint32_t(d);
      ++pos_;
    }
    return v;
  }

  // One character of a literal or class (escapes decoded, raw UTF-8 decoded) as a code point.
  uint32_t parse_char() {
    const size_t at = pos_;
    const uint8_t c = uint8_t(src_[pos_]);
    if (c == '\\') {
      if (++pos_ >= src_.size()) error(at, "unterminated escape");
      const char e = src_[pos_++];
      uint32_t cp = 0;
      switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case '\\': return '\\';
        case '"': return '"';
        case '[': return '[';
        case ']': return ']';
        case 'x': cp = hex_digits(2); break;
        case 'u': cp = hex_digits(4); break;
        case 'U': cp = hex_digits(8); break;
        default: error(at, "unknown escape '\\", e, "'");
      }
      if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) error(at, "escape is not a valid code point");
      return cp;
    }
    if (c < 0x80) {
      ++pos_;
      return c;
    }
    const int n = c >= 0xF0 && c < 0xF8 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (n == 0 || c >= 0xF8 || pos_ + size_t(n) > src_.size()) error(at, "invalid UTF-8");
    uint32_t cp = c & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const uint8_t k = uint8_t(src_[pos_ + size_t(i)]);
      if ((k & 0xC0) != 0x80) error(at, "invalid UTF-8");
      cp = (cp << 6) | (k & 0x3F);
    }
    if (utf8_length(cp) != n || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) error(at, "invalid UTF-8");
    pos_ += size_t(n);
    return cp;
  }

  // The elements that match one code point of `ranges`: a byte set when all are ASCII, otherwise a
  // reference to a generated rule of UTF-8 sequences.
  Element class_element(uint32_t rule, size_t at, const Ranges& ranges) {
    std::vector<ByteSeq> seqs;
    for (auto [lo, hi] : ranges) utf8_sequences(lo, hi, seqs);
    ByteSet ascii;
    bool has_ascii = false;
    std::vector<Alt> alts;
    for (const ByteSeq& s : seqs) {
      if (s.size() == 1) {
        ascii.add_range(s[0].first, s[0].second);
        has_ascii = true;
        continue;
      }
      Alt alt;
      for (auto [lo, hi] : s) alt.push_back(byte_element(lo, hi));
      alt.push_back({Op::End, 0});
      alts.push_back(std::move(alt));
    }
    if (alts.empty()) return {Op::Bytes, byte_set(ascii)};
    if (has_ascii) alts.insert(alts.begin(), Alt{{Op::Bytes, byte_set(ascii)}, {Op::End, 0}});
    return {Op::Ref, generated(rule, at, std::move(alts))};
  }

  uint32_t parse_count() {
    skip_space(true);
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '9') {
      v = v * 10 + uint64_t(src_[pos_] - '0');
      if (v > kMaxRepeat) error(start, "repetition count above ", kMaxRepeat);
      ++pos_;
    }
    if (pos_ == start) error(pos_, "expected a number in '{ }'");
    skip_space(true);
    return uint32_t(v);
  }

  // Replaces the item at seq[item..] by min..max copies (max = UINT32_MAX: unbounded).
  void repeat(uint32_t rule, size_t at, Alt& seq, size_t item, uint32_t min, uint32_t max) {
    Element e;
    if (seq.size() - item == 1) {
      e = seq[item];
    } else {
      Alt body(seq.begin() + long(item), seq.end());
      body.push_back({Op::End, 0});
      e = {Op::Ref, generated(rule, at, {std::move(body)})};
    }
    seq.resize(item);
    for (uint32_t i = 0; i < min; ++i) seq.push_back(e);
    if (max == UINT32_MAX) {
      // tail ::= e tail | ""  (right recursion; the recognizer drops finished frames).
      const uint32_t tail = generated(rule, at, {});
      rules_[tail].alts = {Alt{e, {Op::Ref, tail}, {Op::End, 0}}, Alt{{Op::End, 0}}};
      seq.push_back({Op::Ref, tail});
      return;
    }
    // opt_k ::= e opt_{k-1} | "", nested so the state after i copies is one stack deep.
    uint32_t inner = UINT32_MAX;
    for (uint32_t k = 0; k < max - min; ++k) {
      Alt first{e};
      if (inner != UINT32_MAX) first.push_back({Op::Ref, inner});
      first.push_back({Op::End, 0});
      inner = generated(rule, at, {std::move(first), Alt{{Op::End, 0}}});
    }
    if (inner != UINT32_MAX) seq.push_back({Op::Ref, inner});
  }

  Alt parse_sequence(uint32_t rule, bool nested) {
    Alt seq;
    size_t item = SIZE_MAX;  // where the last item (the operand of a repetition) starts
    for (;;) {
      skip_space(nested);
      if (pos_ >= src_.size()) break;
      const size_t at = pos_;
      const char c = src_[pos_];
      if (c == '"') {
        ++pos_;
        item = seq.size();
        for (;;) {
          if (pos_ >= src_.size() || src_[pos_] == '\n' || src_[pos_] == '\r') error(at, "unterminated literal");
          if (src_[pos_] == '"') break;
          std::string bytes;
          append_utf8(bytes, parse_char());
          for (char b : bytes) seq.push_back(byte_element(uint8_t(b), uint8_t(b)));
        }
        ++pos_;
        if (seq.size() == item) item = SIZE_MAX;  // "" is nothing to repeat
      } else if (c == '[') {
        ++pos_;
        const bool negated = pos_ < src_.size() && src_[pos_] == '^';
        if (negated) ++pos_;
        Ranges ranges;
        for (;;) {
          if (pos_ >= src_.size() || src_[pos_] == '\n' || src_[pos_] == '\r') error(at, "unterminated character class");
          if (src_[pos_] == ']') break;
          const uint32_t lo = parse_char();
          uint32_t hi = lo;
          if (pos_ + 1 < src_.size() && src_[pos_] == '-' && src_[pos_ + 1] != ']') {
            ++pos_;
            hi = parse_char();
            if (hi < lo) error(at, "character class range is reversed");
          }
          ranges.push_back({lo, hi});
        }
        ++pos_;
        ranges = normalize(ranges);
        if (negated) ranges = complement(ranges);
        if (ranges.empty()) error(at, "character class matches nothing");
        item = seq.size();
        seq.push_back(class_element(rule, at, ranges));
      } else if (c == '.') {
        ++pos_;
        item = seq.size();
        seq.push_back(class_element(rule, at, normalize({{0, kMaxCodePoint}})));
      } else if (c == '<') {
        if (src_.substr(pos_, 2) != "<[") error(at, "expected '<[' to start a token terminal");
        pos_ += 2;
        const size_t start = pos_;
        uint64_t id = 0;
        while (pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '9' && id <= INT32_MAX)
          id = id * 10 + uint64_t(src_[pos_++] - '0');
        if (pos_ == start || id > INT32_MAX) error(at, "token terminal needs a token id: <[ID]>");
        if (src_.substr(pos_, 2) != "]>") error(at, "unterminated token terminal: expected ']>'");
        pos_ += 2;
        item = seq.size();
        seq.push_back({Op::Token, uint32_t(id)});
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        std::vector<Alt> alts = parse_alternatives(rule, true);
        skip_space(true);
        if (pos_ >= src_.size() || src_[pos_] != ')') error(at, "unclosed '('");
        ++pos_;
        item = seq.size();
        if (alts.size() == 1) {
          seq.insert(seq.end(), alts[0].begin(), alts[0].end());
          if (seq.size() == item) item = SIZE_MAX;
        } else {
          for (Alt& a : alts) a.push_back({Op::End, 0});
          seq.push_back({Op::Ref, generated(rule, at, std::move(alts))});
        }
      } else if (word_char(c)) {
        const std::string name = parse_name();
        item = seq.size();
        seq.push_back({Op::Ref, symbol(name, at)});
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (item == SIZE_MAX) error(at, "'", c, "' has nothing to repeat");
        ++pos_;
        uint32_t min = 0, max = UINT32_MAX;
        if (c == '+') min = 1;
        if (c == '?') max = 1;
        if (c == '{') {
          min = parse_count();
          max = min;
          if (pos_ < src_.size() && src_[pos_] == ',') {
            ++pos_;
            skip_space(true);
            max = pos_ < src_.size() && src_[pos_] == '}' ? UINT32_MAX : parse_count();
          }
          if (pos_ >= src_.size() || src_[pos_] != '}') error(at, "unterminated '{'");
          ++pos_;
          if (max < min) error(at, "repetition {", min, ",", max, "} has max below min");
        }
        repeat(rule, at, seq, item, min, max);
        item = SIZE_MAX;
      } else {
        break;
      }
    }
    return seq;
  }

  // Top-down expansion loops forever on A ::= ... A with only nullable things before it, so
  // such grammars are refused here, naming the rule the user wrote.
  void check_left_recursion() const {
    const size_t n = rules_.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Alt& a : rules_[r].alts) {
          bool all = true;
          for (const Element& e : a)
            if (e.op != Op::End && !(e.op == Op::Ref && nullable[e.arg])) all = false;
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> first(n);  // rules that can start rule r
    for (size_t r = 0; r < n; ++r)
      for (const Alt& a : rules_[r].alts)
        for (const Element& e : a) {
          if (e.op == Op::End) break;
          if (e.op != Op::Ref) break;
          first[r].push_back(e.arg);
          if (!nullable[e.arg]) break;
        }
    std::vector<char> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> path;
    for (uint32_t s = 0; s < n; ++s) {
      if (color[s]) continue;
      path.push_back({s, 0});
      color[s] = 1;
      while (!path.empty()) {
        auto& [r, k] = path.back();
        if (k == first[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t next = first[r][k++];
        if (color[next] == 1) {
          const RuleDraft& o = rules_[rules_[next].origin];
          if (o.name == rules_[next].name) error(o.def_at, "rule '", o.name, "' is left-recursive");
          error(rules_[next].def_at, "rule '", o.name,
                "' is left-recursive (through a group or repetition of something that can be empty)");
        }
        if (color[next] == 0) {
          color[next] = 1;
          path.push_back({next, 0});
        }
      }
    }
  }

  Grammar flatten(uint32_t root) {
    static std::atomic<uint64_t> serials{1};
    Grammar g;
    g.root = root;
    g.byte_sets = sets_;
    for (RuleDraft& r : rules_) {
      g.rule_begin.push_back(uint32_t(g.alternatives.size()));
      g.rule_names.push_back(r.name);
      for (Alt& a : r.alts) {
        g.alternatives.push_back(uint32_t(g.elements.size()));
        for (const Element& e : a)
          if (e.op != Op::End) g.elements.push_back(e);
        g.elements.push_back({Op::End, 0});
      }
    }
    g.rule_begin.push_back(uint32_t(g.alternatives.size()));
    g.serial = serials.fetch_add(1);
    return g;
  }

  std::string_view src_;
  size_t pos_ = 0;
  std::vector<RuleDraft> rules_;
  std::map<std::string, uint32_t> ids_;
  std::map<ByteSet, uint32_t> set_ids_;
  std::vector<ByteSet> sets_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace sluice::guide
