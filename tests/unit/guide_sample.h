// Random sentences of a guide::Grammar, for property tests: a derivation walk that picks rule
// alternatives at random and switches to the shortest way out once the sentence is long or deep,
// so it always ends. A class becomes alternatives of UTF-8 byte ranges, so random bytes from each
// range spell valid code points.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "guide/grammar.h"

namespace sluice::guide::testing {

class Sampler {
 public:
  explicit Sampler(const Grammar& g, uint64_t seed) : g_(g), rng_(seed) {
    // The fewest bytes each rule can end with (token terminals count one), by fixpoint.
    const uint32_t n = g.rules();
    min_.assign(n, kInf);
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t r = 0; r < n; ++r) {
        for (uint32_t k = g.rule_begin[r]; k < g.rule_begin[r + 1]; ++k) {
          const uint64_t c = alt_cost(g.alternatives[k]);
          if (c < min_[r]) {
            min_[r] = c;
            changed = true;
          }
        }
      }
    }
  }

  // A sentence of root: its bytes; token terminals are refused (JSON grammars have none).
  std::string sentence(size_t soft_limit = 200) {
    out_.clear();
    limit_ = soft_limit;
    expand(g_.root, 0);
    return out_;
  }

 private:
  static constexpr uint64_t kInf = UINT64_MAX / 4;

  uint64_t alt_cost(uint32_t at) const {
    uint64_t c = 0;
    for (uint32_t p = at; g_.elements[p].op != Op::End; ++p) {
      const Element e = g_.elements[p];
      c += e.op == Op::Ref ? min_[e.arg] : 1;
      if (c >= kInf) return kInf;
    }
    return c;
  }

  void expand(uint32_t rule, int depth) {
    const uint32_t first = g_.rule_begin[rule], last = g_.rule_begin[rule + 1];
    uint32_t pick;
    if (out_.size() > limit_ || depth > 60) {
      pick = first;
      for (uint32_t k = first; k < last; ++k)
        if (alt_cost(g_.alternatives[k]) < alt_cost(g_.alternatives[pick])) pick = k;
    } else {
      pick = first + uint32_t(rng_() % (last - first));
    }
    for (uint32_t p = g_.alternatives[pick]; g_.elements[p].op != Op::End; ++p) {
      const Element e = g_.elements[p];
      if (e.op == Op::Ref) {
        expand(e.arg, depth + 1);
      } else if (e.op == Op::Bytes) {
        std::vector<uint8_t> bytes;
        for (int b = 0; b < 256; ++b)
          if (g_.byte_sets[e.arg].has(uint8_t(b))) bytes.push_back(uint8_t(b));
        out_ += char(bytes[rng_() % bytes.size()]);
      } else {
        fail("sampler: token terminals are not supported");
      }
    }
  }

  const Grammar& g_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> min_;
  std::string out_;
  size_t limit_ = 0;
};

}  // namespace sluice::guide::testing
