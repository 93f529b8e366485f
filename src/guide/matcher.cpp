// The pushdown step: advance every stack whose top terminal takes the input, expand rule
// references until each stack's top is a terminal again, then merge duplicates into canonical
// order.
#include "guide/matcher.h"

#include <algorithm>
#include <utility>

#include "core/error.h"

namespace sluice::guide {
namespace detail {
namespace {

struct Expander {
  const Grammar& g;
  StepScratch& s;
  size_t emitted = 0;

  void emit(const std::vector<uint32_t>& st) {
    // Duplicates are only merged at the end, so bound the raw count too.
    if (++emitted > 4 * kMaxStacks)
      fail("grammar: more than ", kMaxStacks, " parse stacks at once (the grammar is too ambiguous)");
    s.raw.push_back(uint32_t(st.size()));
    s.raw.insert(s.raw.end(), st.begin(), st.end());
  }

  // Expands `st` until every resulting stack's top is a terminal; leaves `st` as it found it.
  void expand(std::vector<uint32_t>& st) {
    if (st.empty()) {
      s.complete = true;
      return;
    }
    const uint32_t p = st.back();
    const Element e = g.elements[p];
    if (e.op != Op::Ref) {
      emit(st);
      return;
    }
    st.pop_back();
    const bool more = g.elements[p + 1].op != Op::End;
    if (more) st.push_back(p + 1);
    for (uint32_t k = g.rule_begin[e.arg]; k < g.rule_begin[e.arg + 1]; ++k) {
      const uint32_t a = g.alternatives[k];
      if (g.elements[a].op == Op::End) {
        expand(st);
      } else {
        st.push_back(a);
        expand(st);
        st.pop_back();
      }
    }
    if (more) st.pop_back();
    st.push_back(p);
  }
};

// Sorts and dedupes the stacks in s.raw into out (after the completion word).
void canonicalize(StepScratch& s, std::vector<uint32_t>& out) {
  out.clear();
  out.push_back(s.complete ? 1 : 0);
  s.index.clear();
  for (uint32_t i = 0; i < s.raw.size(); i += s.raw[i] + 1) s.index.push_back({i + 1, s.raw[i]});
  if (s.index.size() > 1) {
    const uint32_t* w = s.raw.data();
    auto less = [w](const std::pair<uint32_t, uint32_t>& a, const std::pair<uint32_t, uint32_t>& b) {
      return std::lexicographical_compare(w + a.first, w + a.first + a.second, w + b.first, w + b.first + b.second);
    };
    auto same = [w](const std::pair<uint32_t, uint32_t>& a, const std::pair<uint32_t, uint32_t>& b) {
      return a.second == b.second && std::equal(w + a.first, w + a.first + a.second, w + b.first);
    };
    std::sort(s.index.begin(), s.index.end(), less);
    s.index.erase(std::unique(s.index.begin(), s.index.end(), same), s.index.end());
    if (s.index.size() > kMaxStacks)
      fail("grammar: more than ", kMaxStacks, " parse stacks at once (the grammar is too ambiguous)");
  }
  for (auto [at, len] : s.index) {
    out.push_back(len);
    out.insert(out.end(), s.raw.begin() + at, s.raw.begin() + at + len);
  }
}

template <typename Takes>
bool step(const Grammar& g, const uint32_t* in, size_t n, Takes takes, StepScratch& s, std::vector<uint32_t>& out) {
  s.raw.clear();
  s.complete = false;
  Expander x{g, s};
  std::vector<uint32_t>& st = s.work;
  for (size_t i = 1; i < n; i += in[i] + 1) {
    const uint32_t len = in[i];
    const uint32_t top = in[i + len];
    if (!takes(g.elements[top])) continue;
    st.assign(in + i + 1, in + i + len);
    if (g.elements[top + 1].op != Op::End) st.push_back(top + 1);
    x.expand(st);
  }
  canonicalize(s, out);
  return out.size() > 1 || out[0] != 0;
}

}  // namespace

void initial_state(const Grammar& g, StepScratch& s, std::vector<uint32_t>& out) {
  s.raw.clear();
  s.complete = false;
  Expander x{g, s};
  std::vector<uint32_t>& st = s.work;
  st.clear();
  for (uint32_t k = g.rule_begin[g.root]; k < g.rule_begin[g.root + 1]; ++k) {
    const uint32_t a = g.alternatives[k];
    if (g.elements[a].op == Op::End) {
      s.complete = true;
      continue;
    }
    st.assign(1, a);
    x.expand(st);
  }
  canonicalize(s, out);
}

bool step_byte(const Grammar& g, const uint32_t* in, size_t n, uint8_t byte, StepScratch& s, std::vector<uint32_t>& out) {
  const ByteSet* sets = g.byte_sets.data();
  return step(
      g, in, n, [sets, byte](Element e) { return e.op == Op::Bytes && sets[e.arg].has(byte); }, s, out);
}

bool step_token(const Grammar& g, const uint32_t* in, size_t n, int32_t token, StepScratch& s, std::vector<uint32_t>& out) {
  return step(
      g, in, n, [token](Element e) { return e.op == Op::Token && e.arg == uint32_t(token); }, s, out);
}

void merge_states(std::vector<uint32_t>& a, const std::vector<uint32_t>& b, StepScratch& s) {
  s.raw.assign(a.begin() + 1, a.end());
  s.raw.insert(s.raw.end(), b.begin() + 1, b.end());
  s.complete = a[0] != 0 || b[0] != 0;
  canonicalize(s, a);
}

}  // namespace detail

namespace {

struct Buffers {
  detail::StepScratch scratch;
  std::vector<uint32_t> a, b;
};

Buffers& buffers() {
  thread_local Buffers b;
  return b;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  SLUICE_CHECK(grammar_, "matcher: no grammar");
  detail::initial_state(*grammar_, buffers().scratch, state_.words);
}

bool Matcher::accept_byte(uint8_t b) {
  Buffers& B = buffers();
  if (!detail::step_byte(*grammar_, state_.words.data(), state_.words.size(), b, B.scratch, B.a)) return false;
  state_.words.swap(B.a);
  return true;
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (bytes.empty()) return true;
  Buffers& B = buffers();
  std::vector<uint32_t>* cur = &state_.words;
  std::vector<uint32_t>* next = &B.a;
  for (char c : bytes) {
    if (!detail::step_byte(*grammar_, cur->data(), cur->size(), uint8_t(c), B.scratch, *next)) return false;
    cur = next;
    next = next == &B.a ? &B.b : &B.a;
  }
  state_.words.swap(*cur);
  return true;
}

bool Matcher::accept_token_terminal(int32_t id) {
  Buffers& B = buffers();
  if (!detail::step_token(*grammar_, state_.words.data(), state_.words.size(), id, B.scratch, B.a)) return false;
  state_.words.swap(B.a);
  return true;
}

bool Matcher::accept_token(int32_t id, std::string_view bytes, bool special) {
  Matcher by_bytes = *this;
  const bool bytes_ok = !special && !bytes.empty() && by_bytes.accept_bytes(bytes);
  Buffers& B = buffers();
  const bool token_ok =
      detail::step_token(*grammar_, state_.words.data(), state_.words.size(), id, B.scratch, B.b);
  if (!bytes_ok && !token_ok) return false;
  if (!token_ok) {
    state_ = std::move(by_bytes.state_);
  } else if (!bytes_ok) {
    state_.words.swap(B.b);
  } else {
    state_.words = std::move(by_bytes.state_.words);
    detail::merge_states(state_.words, B.b, B.scratch);
  }
  return true;
}

size_t Matcher::stacks() const {
  size_t n = 0;
  for (size_t i = 1; i < state_.words.size(); i += state_.words[i] + 1) ++n;
  return n;
}

}  // namespace sluice::guide
