// A context-free grammar over bytes and vocabulary tokens, compiled from GBNF text (the syntax of
// llama.cpp's grammars), for guided decoding.
//
// The compiled form works on bytes, not code points: every character class is rewritten into
// alternatives of UTF-8 byte sequences when it is parsed, so a recognizer steps one byte at a
// time and a token that ends inside a multi-byte code point leaves it half way along such a
// sequence, ready for the next token. Literals are the UTF-8 bytes of their code points.
//
// GBNF accepted: `name ::= alternatives` rules (names [a-zA-Z0-9_-]+, one rule per line, newlines
// allowed after `::=`, after `|`, before a line that starts with `|`, and anywhere inside
// parentheses), `|`, sequences, "literals" with \n \t \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH
// (\xHH is the code point U+00HH, as in llama.cpp), classes [a-z0-9] and [^"\\] over code points
// (a negated class matches every valid code point outside it, surrogates never), `.` (any code
// point), ( groups ), * + ? {m} {m,} {m,n}, # comments, and <[ID]>: exactly the vocabulary token
// ID, never bytes (for special tokens). The start rule is `root`. Left recursion is refused: the
// recognizer expands rules top down.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::guide {

// A set of bytes, one bit each.
struct ByteSet {
  uint64_t bits[4] = {0, 0, 0, 0};
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) add(uint8_t(b));
  }
  auto operator<=>(const ByteSet&) const = default;
};

enum class Op : uint8_t {
  End,    // ends an alternative
  Bytes,  // one byte from byte_sets[arg]
  Token,  // the vocabulary token whose id is arg
  Ref,    // rule arg
};

struct Element {
  Op op = Op::End;
  uint32_t arg = 0;
};

// Rules as flat element lists: rule r has the alternatives that start at
// elements[alternatives[k]] for k in [rule_begin[r], rule_begin[r + 1]), each ended by an End.
// An alternative that starts with End is empty. A position (index into elements) is what the
// recognizer keeps on its stacks.
struct Grammar {
  std::vector<Element> elements;
  std::vector<uint32_t> alternatives;
  std::vector<uint32_t> rule_begin;
  std::vector<std::string> rule_names;  // generated rules (groups, repetitions, classes) contain '~'
  std::vector<ByteSet> byte_sets;
  uint32_t root = 0;
  // Distinct for every grammar compiled in this process, so caches can tell grammars apart.
  uint64_t serial = 0;

  uint32_t rules() const { return uint32_t(rule_begin.size() - 1); }
  std::string_view rule_name(uint32_t r) const { return rule_names[r]; }
};

// Compiles GBNF text. Throws sluice::Error "gbnf LINE:COL: what" (undefined or twice-defined
// rule, missing root, unterminated literal or class, bad escape, left recursion naming the rule).
Grammar parse_gbnf(std::string_view text);

}  // namespace sluice::guide
