// Vocabulary trie construction and the mask walk over it.
#include "guide/token_mask.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <utility>

#include "core/error.h"

namespace sluice::guide {

namespace {

// Beyond this many interned states a cache starts over (each state holds a 1 KiB row).
constexpr size_t kMaxCachedStates = 16384;
// The memo of whole masks holds at most this many bytes (about 200 masks at a 160k vocabulary) and
// this many masks.
constexpr size_t kMemoBytes = size_t(4) << 20, kMemoMasks = 256;

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
  clear_memo();  // its state ids are gone
}

void MaskCache::clear_memo() {
  memo_slot_.clear();
  memo_state_.clear();
  memo_bits_.clear();
  memo_victim_ = 0;
}

const uint64_t* MaskCache::memo(int32_t state) const {
  if (size_t(state) >= memo_slot_.size() || memo_slot_[size_t(state)] < 0) return nullptr;
  return memo_bits_.data() + size_t(memo_slot_[size_t(state)]) * memo_words_;
}

void MaskCache::remember(int32_t state, const std::vector<uint64_t>& bits) {
  const size_t words = bits.size();  // memo_words_, set with memo_vocab_
  if (words == 0) return;
  const size_t slots = std::clamp<size_t>(kMemoBytes / (words * 8), 1, kMemoMasks);
  size_t slot;
  if (memo_state_.size() < slots) {
    slot = memo_state_.size();
    memo_state_.push_back(state);
    memo_bits_.resize(memo_bits_.size() + words);
  } else {
    slot = memo_victim_;
    memo_victim_ = (memo_victim_ + 1) % slots;
    memo_slot_[size_t(memo_state_[slot])] = -1;
    memo_state_[slot] = state;
  }
  if (memo_slot_.size() <= size_t(state)) memo_slot_.resize(size_t(state) + 1, -1);
  memo_slot_[size_t(state)] = int32_t(slot);
  std::copy(bits.begin(), bits.end(), memo_bits_.begin() + ptrdiff_t(slot * words));
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
  static std::atomic<uint64_t> serials{1};
  serial_ = serials.fetch_add(1);
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

int32_t Vocabulary::enter(const Matcher& m, std::vector<uint64_t>& bits, MaskCache& cache, bool* hit) const {
  const Grammar& g = m.grammar();
  if (cache.serial_ != g.serial || cache.states() > kMaxCachedStates) {
    cache.clear();
    cache.serial_ = g.serial;
  }
  const size_t words = (size_t(size()) + 63) / 64;
  if (cache.memo_vocab_ != serial_) {
    cache.clear_memo();
    cache.memo_vocab_ = serial_;
    cache.memo_words_ = words;
  }
  // The mask is a function of the start state alone (the grammar and the vocabulary are fixed).
  const int32_t first = cache.intern(m.snapshot().words);
  const uint64_t* memo = cache.memo(first);
  *hit = memo != nullptr;
  if (memo) {
    bits.assign(memo, memo + words);
    ++cache.memo_hits_;
  } else {
    ++cache.walks_;
    bits.assign(words, 0);
  }
  return first;
}

void Vocabulary::token_terminals(const Matcher& m, uint64_t* out) const {
  const Grammar& g = m.grammar();
  const std::vector<uint32_t>& start = m.snapshot().words;
  for (size_t i = 1; i < start.size(); i += start[i] + 1) {
    const Element e = g.elements[start[i + start[i]]];
    if (e.op == Op::Token && e.arg < uint32_t(size())) out[e.arg >> 6] |= uint64_t(1) << (e.arg & 63);
  }
}

void Vocabulary::allowed(const Matcher& m, std::vector<uint64_t>& bits, MaskCache& cache) const {
  bool hit = false;
  const int32_t first = enter(m, bits, cache, &hit);
  if (hit) return;
  token_terminals(m, bits.data());
  // With no stacks no byte can follow.
  if (m.snapshot().words.size() > 1) walk(cache, m.grammar(), first, bits.data(), 0, node_byte_.size(), 0);
  cache.remember(first, bits);
}

void Vocabulary::walk(MaskCache& cache, const Grammar& g, int32_t first, uint64_t* out, size_t begin,
                      size_t end, size_t root) const {
  std::vector<int32_t>& at = cache.depth_state_;
  at.resize(max_depth_ + 1);
  at[0] = first;
  const uint8_t* byte = node_byte_.data();
  const uint32_t* depth = node_depth_.data();
  const uint32_t* skip = node_skip_.data();
  const uint32_t* tok = node_tokens_.data();
  const int32_t* ids = token_ids_.data();
  size_t i = begin;
  if (begin < end && root != begin) {  // a cut inside root's subtree: start after root's byte
    const int32_t to = cache.next(g, first, byte[root]);
    if (to == MaskCache::kDead) i = skip[root];  // the rest of root's subtree is dead, not the roots after it
    else at[1] = to;
  }
  while (i < end) {
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

int default_mask_parts(size_t trie_nodes) {
  if (const char* env = std::getenv("SLUICE_MASK_PARTS"); env && *env) {
    const int parts = std::atoi(env);
    SLUICE_CHECK(parts >= 1 && parts <= 64, "SLUICE_MASK_PARTS=", env, ": expected a share count from 1 to 64");
    return parts;
  }
  // A small vocabulary's walk (4,352 tokens: ~0.1 ms) costs less than waking the helpers.
  if (trie_nodes < kSharedWalkNodes) return 1;
  return std::clamp(int(std::thread::hardware_concurrency() / 4), 1, 4);
}

ParallelMasks::ParallelMasks(std::shared_ptr<const Vocabulary> vocab, int parts, size_t min_shared_nodes)
    : vocab_(std::move(vocab)), parts_(parts), min_shared_nodes_(min_shared_nodes) {
  SLUICE_CHECK(parts >= 1, "parallel masks: ", parts, " shares");
  const Vocabulary& v = *vocab_;
  const size_t n = v.nodes();
  for (size_t i = 0; i < n; i = v.node_skip_[i]) roots_.push_back(uint32_t(i));
  // Chunks of about n / (8 parts) nodes, cut at first- or second-byte nodes (one first byte's
  // subtree, a space's in a BPE vocabulary, can hold a third of the trie).
  const size_t target = std::max<size_t>(1, n / (size_t(parts) * 8));
  size_t root = 0;
  chunks_.push_back(0);
  chunk_root_.push_back(0);
  for (size_t i = 1; i < n; ++i) {
    if (v.node_depth_[i] == 1) root = i;
    if (v.node_depth_[i] <= 2 && i - chunks_.back() >= target) {
      chunks_.push_back(i);
      chunk_root_.push_back(root);
    }
  }
  chunks_.push_back(n);
  caches_.resize(size_t(parts));
  shares_.resize(size_t(parts));
  joined_.assign(size_t(parts), 0);
}

ParallelMasks::~ParallelMasks() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

void ParallelMasks::take_chunks(size_t k, const Matcher& m, int32_t first, uint64_t* out) {
  const size_t count = chunks_.size() - 1;
  for (size_t c; (c = next_chunk_.fetch_add(1, std::memory_order_relaxed)) < count;)
    vocab_->walk(caches_[k], m.grammar(), first, out, chunks_[c], chunks_[c + 1], chunk_root_[c]);
}

void ParallelMasks::help(size_t k, uint64_t seen) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || round_ != seen; });
    if (stop_) return;
    seen = round_;
    if (!open_) continue;  // woke after the caller had finished this round's chunks
    ++active_;
    joined_[k] = 1;
    const Matcher& m = *job_;
    lock.unlock();
    std::exception_ptr error;
    try {
      bool hit = false;  // a helper's cache memoizes nothing (remember() is never called on it)
      const int32_t first = vocab_->enter(m, shares_[k], caches_[k], &hit);
      take_chunks(k, m, first, shares_[k].data());
    } catch (...) {
      error = std::current_exception();
      next_chunk_.store(chunks_.size(), std::memory_order_relaxed);  // the round fails: stop the others
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (--active_ == 0) cv_.notify_all();
  }
}

bool ParallelMasks::wide(const Grammar& g, int32_t first) {
  MaskCache& cache = caches_[0];
  size_t reached = 0;
  for (uint32_t i : roots_)
    if (cache.next(g, first, vocab_->node_byte_[i]) != MaskCache::kDead &&
        (reached += vocab_->node_skip_[i] - i) >= min_shared_nodes_)
      return true;
  return false;
}

void ParallelMasks::allowed(const Matcher& m, std::vector<uint64_t>& bits, bool share) {
  const Vocabulary& v = *vocab_;
  MaskCache& cache = caches_[0];
  bool hit = false;
  const int32_t first = v.enter(m, bits, cache, &hit);
  if (hit) return;
  v.token_terminals(m, bits.data());
  if (m.snapshot().words.size() > 1) {
    if (parts_ == 1 || !share || !wide(m.grammar(), first)) {
      v.walk(cache, m.grammar(), first, bits.data(), 0, v.nodes(), 0);
      cache.remember(first, bits);
      return;
    }
    ++shared_walks_;
    // (Started here, not in the constructor: a grammar with no wide state never starts them.
    // round_ is written on this thread only, so reading it here needs no lock.)
    while (helpers_.size() + 1 < size_t(parts_)) {
      const size_t k = helpers_.size() + 1;
      helpers_.emplace_back([this, k, seen = round_] { help(k, seen); });
    }
    next_chunk_.store(0, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &m;
      open_ = true;
      ++round_;
    }
    cv_.notify_all();
    // A helper that joined reads m until it is done: wait for it even when this walk fails.
    std::exception_ptr error;
    try {
      if (!leave_chunks_) take_chunks(0, m, first, bits.data());
    } catch (...) {
      error = std::current_exception();
      next_chunk_.store(chunks_.size(), std::memory_order_relaxed);
    }
    bool helped = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (leave_chunks_)
        cv_.wait(lock, [&] { return active_ == 0 && next_chunk_.load(std::memory_order_relaxed) >= chunks_.size() - 1; });
      open_ = false;
      cv_.wait(lock, [&] { return active_ == 0; });
      job_ = nullptr;
      if (!error) error = std::exchange(error_, nullptr);
      error_ = nullptr;
      for (size_t k = 1; k < joined_.size(); ++k) {
        if (!std::exchange(joined_[k], 0) || error) continue;
        helped = true;
        for (size_t w = 0; w < bits.size(); ++w) bits[w] |= shares_[k][w];
      }
    }
    if (error) std::rethrow_exception(error);
    helped_walks_ += helped;
  }
  cache.remember(first, bits);
}

}  // namespace sluice::guide
