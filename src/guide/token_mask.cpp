// Vocabulary trie construction and the mask walk over it.
#include "guide/token_mask.h"

#include <algorithm>

#include "core/error.h"

namespace sluice::guide {

namespace {

// Beyond this many interned states a cache starts over (each state holds a 1 KiB row).
constexpr size_t kMaxCachedStates = 16384;

uint64_t hash_words(const uint32_t* w, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (size_t i = 0; i < n; ++i) {
    h ^= w[i];
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return h;
}

}  // namespace

void MaskCache::clear() {
  pool_.clear();
  begin_.assign(1, 0);
  next_.clear();
  table_.clear();
}

int32_t MaskCache::intern(const std::vector<uint32_t>& words) {
  if (table_.size() < 2 * (states() + 1)) {
    size_t size = 64;
    while (size < 4 * (states() + 1)) size *= 2;  // a power of two, for the mask below
    table_.assign(size, -1);
    for (size_t k = 0; k < states(); ++k) {
      size_t h = hash_words(pool_.data() + begin_[k], begin_[k + 1] - begin_[k]) & (table_.size() - 1);
      while (table_[h] >= 0) h = (h + 1) & (table_.size() - 1);
      table_[h] = int32_t(k);
    }
  }
  size_t h = hash_words(words.data(), words.size()) & (table_.size() - 1);
  for (; table_[h] >= 0; h = (h + 1) & (table_.size() - 1)) {
    const int32_t k = table_[h];
    const size_t n = begin_[k + 1] - begin_[k];
    if (n == words.size() && std::equal(words.begin(), words.end(), pool_.begin() + begin_[k])) return k;
  }
  const int32_t k = int32_t(states());
  table_[h] = k;
  pool_.insert(pool_.end(), words.begin(), words.end());
  begin_.push_back(uint32_t(pool_.size()));
  next_.resize(next_.size() + 256, kUnknown);
  return k;
}

int32_t MaskCache::next(const Grammar& g, int32_t state, uint8_t byte) {
  int32_t& slot = next_[size_t(state) * 256 + byte];
  if (slot != kUnknown) return slot;
  const bool alive = detail::step_byte(g, pool_.data() + begin_[state], begin_[state + 1] - begin_[state], byte,
                                       scratch_, tmp_);
  const int32_t to = alive ? intern(tmp_) : kDead;
  next_[size_t(state) * 256 + byte] = to;  // `slot` may have moved with next_
  return to;
}

Vocabulary::Vocabulary(const std::vector<std::string_view>& tokens, const std::vector<bool>& special) {
  SLUICE_CHECK(tokens.size() == special.size(), "vocabulary: ", tokens.size(), " tokens but ", special.size(),
               " special flags");
  SLUICE_CHECK(tokens.size() < size_t(INT32_MAX), "vocabulary: too many tokens");
  offsets_.reserve(tokens.size() + 1);
  offsets_.push_back(0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    bytes_ += tokens[i];
    offsets_.push_back(bytes_.size());
    special_.push_back(special[i] ? 1 : 0);
  }
  std::vector<int32_t> order;
  for (int32_t i = 0; i < size(); ++i)
    if (!special_[i] && !bytes(i).empty()) order.push_back(i);
  std::sort(order.begin(), order.end(), [this](int32_t a, int32_t b) {
    const std::string_view x = bytes(a), y = bytes(b);
    return x != y ? x < y : a < b;
  });
  // Sorted strings give the trie in preorder: each string adds nodes for what it does not share
  // with the previous one, and a node's subtree ends when a later string stops sharing it.
  std::vector<uint32_t> path;  // node index per depth - 1
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view s = bytes(id);
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    while (path.size() > common) {
      node_skip_[path.back()] = uint32_t(node_byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(uint32_t(node_byte_.size()));
      node_byte_.push_back(uint8_t(s[d]));
      node_depth_.push_back(uint32_t(d + 1));
      node_skip_.push_back(0);
      node_tokens_.push_back(uint32_t(token_ids_.size()));
    }
    token_ids_.push_back(id);
    max_depth_ = std::max(max_depth_, uint32_t(s.size()));
    prev = s;
  }
  for (uint32_t n : path) node_skip_[n] = uint32_t(node_byte_.size());
  node_tokens_.push_back(uint32_t(token_ids_.size()));
}

void Vocabulary::allowed(const Matcher& m, std::vector<uint64_t>& bits, MaskCache& cache) const {
  const Grammar& g = m.grammar();
  if (cache.serial_ != g.serial || cache.states() > kMaxCachedStates) {
    cache.clear();
    cache.serial_ = g.serial;
  }
  const std::vector<uint32_t>& start = m.snapshot().words;
  bits.assign((size_t(size()) + 63) / 64, 0);
  // Token terminals the grammar expects now.
  for (size_t i = 1; i < start.size(); i += start[i] + 1) {
    const Element e = g.elements[start[i + start[i]]];
    if (e.op == Op::Token && e.arg < uint32_t(size())) bits[e.arg >> 6] |= uint64_t(1) << (e.arg & 63);
  }
  if (start.size() == 1) return;  // no stacks: no byte can follow
  std::vector<int32_t>& at = cache.depth_state_;
  at.resize(max_depth_ + 1);
  at[0] = cache.intern(start);
  const size_t n = node_byte_.size();
  const uint8_t* byte = node_byte_.data();
  const uint32_t* depth = node_depth_.data();
  const uint32_t* skip = node_skip_.data();
  const uint32_t* tok = node_tokens_.data();
  const int32_t* ids = token_ids_.data();
  uint64_t* out = bits.data();
  for (size_t i = 0; i < n;) {
    const int32_t from = at[depth[i] - 1];
    int32_t to = cache.next_[size_t(from) * 256 + byte[i]];
    if (to == MaskCache::kUnknown) to = cache.next(g, from, byte[i]);
    if (to == MaskCache::kDead) {
      i = skip[i];
      continue;
    }
    at[depth[i]] = to;
    for (uint32_t k = tok[i]; k < tok[i + 1]; ++k) out[uint32_t(ids[k]) >> 6] |= uint64_t(1) << (ids[k] & 63);
    ++i;
  }
}

void Vocabulary::allowed(const Matcher& m, std::vector<uint64_t>& bits) const {
  MaskCache cache;
  allowed(m, bits, cache);
}

bool Vocabulary::allows(const Matcher& m, int32_t id) const {
  Matcher copy = m;
  return accept(copy, id);
}

bool Vocabulary::accept(Matcher& m, int32_t id) const {
  SLUICE_CHECK(id >= 0 && id < size(), "vocabulary: token id ", id, " outside [0, ", size(), ")");
  return m.accept_token(id, bytes(id), special(id));
}

}  // namespace sluice::guide
