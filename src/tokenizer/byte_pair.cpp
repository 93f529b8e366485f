// The byte-pair merge loop and its hash tables (see byte_pair.h). Short pieces use a linear scan
// over a small array (cache friendly); long pieces use a heap with lazy invalidation so that a
// 10 MB run without spaces stays O(n log n). Both pick exactly the same merges.
#include "tokenizer/byte_pair.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <queue>

#include "core/error.h"

namespace sluice::tokenizer {
namespace {

inline uint64_t mix(uint64_t x) {
  unsigned __int128 m = static_cast<unsigned __int128>(x) * 0x9E3779B97F4A7C15ULL;
  return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
}

inline uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x243F6A8885A308D3ULL ^ (n * 0x100000001B3ULL);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = mix(h ^ w);
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  return mix(h ^ w ^ 0x5851F42D4C957F2DULL);
}

constexpr int32_t kNoRank = INT32_MAX;

// A symbol of the piece being merged: for byte BPE a byte range, for id BPE a token id.
struct Symbol {
  uint32_t start;
  uint32_t end;
  int32_t id;
};

// Merge oracle for tiktoken ranks: a pair's rank is the rank of its concatenated bytes.
struct ByteMerger {
  std::string_view piece;
  const TokenRankMap& ranks;
  int32_t pair_rank(const Symbol& a, const Symbol& b, int32_t& merged_id) const {
    int32_t r = ranks.find(piece.substr(a.start, b.end - a.start));
    merged_id = r;
    return r < 0 ? kNoRank : r;
  }
  int32_t final_id(const Symbol& s) const { return ranks.find(piece.substr(s.start, s.end - s.start)); }
};

// Merge oracle for tokenizer.json merges.
struct IdMerger {
  const MergeTable& merges;
  int32_t pair_rank(const Symbol& a, const Symbol& b, int32_t& merged_id) const {
    MergeTable::Merge m = merges.find(a.id, b.id);
    merged_id = m.merged_id;
    return m.rank < 0 ? kNoRank : m.rank;
  }
  int32_t final_id(const Symbol& s) const { return s.id; }
};

// Linear scan: fine for the short pieces that dominate ordinary text.
template <typename Merger>
void merge_short(std::vector<Symbol>& syms, const Merger& merger, std::vector<int32_t>& out) {
  thread_local std::vector<int32_t> rank;
  thread_local std::vector<int32_t> merged;
  size_t n = syms.size();
  rank.assign(n, kNoRank);
  merged.assign(n, -1);
  for (size_t i = 0; i + 1 < n; ++i) rank[i] = merger.pair_rank(syms[i], syms[i + 1], merged[i]);
  while (n > 1) {
    size_t best = 0;
    int32_t best_rank = kNoRank;
    for (size_t i = 0; i + 1 < n; ++i)
      if (rank[i] < best_rank) best_rank = rank[i], best = i;
    if (best_rank == kNoRank) break;
    syms[best] = Symbol{syms[best].start, syms[best + 1].end, merged[best]};
    syms.erase(syms.begin() + long(best) + 1);
    rank.erase(rank.begin() + long(best) + 1);
    merged.erase(merged.begin() + long(best) + 1);
    --n;
    if (best + 1 < n) rank[best] = merger.pair_rank(syms[best], syms[best + 1], merged[best]);
    else rank[best] = kNoRank;
    if (best > 0) rank[best - 1] = merger.pair_rank(syms[best - 1], syms[best], merged[best - 1]);
  }
  for (size_t i = 0; i < n; ++i) out.push_back(merger.final_id(syms[i]));
}

// Heap with lazy invalidation: an entry is live while both symbols are alive, adjacent, and have
// the extents they had when it was pushed. Order (rank, left start) == leftmost lowest rank.
template <typename Merger>
void merge_long(std::vector<Symbol>& syms, const Merger& merger, std::vector<int32_t>& out) {
  struct Entry {
    int32_t rank;
    uint32_t left;       // index of the left symbol
    uint32_t right;      // index of the right symbol
    uint32_t right_end;  // extent check: the right symbol's end when pushed
    int32_t merged_id;
    // A live symbol keeps its original index, so index order is position order.
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  size_t n = syms.size();
  std::vector<uint32_t> next(n), prev(n);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) next[i] = uint32_t(i + 1), prev[i] = uint32_t(i - 1);
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push = [&](uint32_t l, uint32_t r) {
    int32_t merged_id;
    int32_t rk = merger.pair_rank(syms[l], syms[r], merged_id);
    if (rk != kNoRank) heap.push(Entry{rk, l, r, syms[r].end, merged_id});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(uint32_t(i), uint32_t(i + 1));
  while (!heap.empty()) {
    Entry e = heap.top();
    heap.pop();
    if (!alive[e.left] || !alive[e.right] || next[e.left] != e.right || syms[e.right].end != e.right_end) continue;
    syms[e.left] = Symbol{syms[e.left].start, syms[e.right].end, e.merged_id};
    alive[e.right] = 0;
    next[e.left] = next[e.right];
    if (next[e.left] < n) prev[next[e.left]] = e.left;
    if (prev[e.left] != uint32_t(-1)) push(prev[e.left], e.left);
    if (next[e.left] < n) push(e.left, next[e.left]);
  }
  for (uint32_t i = 0; i < n; i = next[i]) out.push_back(merger.final_id(syms[i]));
}

constexpr size_t kShortPiece = 96;

// Per-thread scratch keeps its capacity between calls, except after a huge piece.
template <typename T>
void release_if_huge(std::vector<T>& v) {
  if (v.capacity() > (size_t(1) << 20)) std::vector<T>().swap(v);
}

}  // namespace

void TokenRankMap::reserve(size_t count) {
  size_t cap = 16;
  while (cap < count * 2) cap <<= 1;
  if (cap > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{0, 0, -1, 0});
    count_ = 0;
    for (const Slot& s : old)
      if (s.rank >= 0) {
        uint64_t h = hash_bytes(blob_.data() + s.offset, s.length);
        size_t mask = slots_.size() - 1;
        for (size_t i = h & mask;; i = (i + 1) & mask)
          if (slots_[i].rank < 0) {
            slots_[i] = s;
            ++count_;
            break;
          }
      }
  }
}

void TokenRankMap::grow() { reserve(std::max<size_t>(16, count_ * 2 + 2)); }

bool TokenRankMap::insert(std::string_view bytes, int32_t rank) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  uint64_t h = hash_bytes(bytes.data(), bytes.size());
  uint32_t tag = uint32_t(h >> 32);
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.rank < 0) {
      SLUICE_CHECK(blob_.size() + bytes.size() < UINT32_MAX, "tokenizer: token table larger than 4 GiB");
      s = Slot{uint32_t(blob_.size()), uint32_t(bytes.size()), rank, tag};
      blob_.append(bytes);
      ++count_;
      return true;
    }
    if (s.tag == tag && s.length == bytes.size() && std::memcmp(blob_.data() + s.offset, bytes.data(), bytes.size()) == 0)
      return false;
  }
}

int32_t TokenRankMap::find(std::string_view bytes) const {
  if (slots_.empty()) return -1;
  uint64_t h = hash_bytes(bytes.data(), bytes.size());
  uint32_t tag = uint32_t(h >> 32);
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.rank < 0) return -1;
    if (s.tag == tag && s.length == bytes.size() && std::memcmp(blob_.data() + s.offset, bytes.data(), bytes.size()) == 0)
      return s.rank;
  }
}

void MergeTable::reserve(size_t count) {
  size_t cap = 16;
  while (cap < count * 2) cap <<= 1;
  if (cap <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(cap, Slot{0, Merge{-1, -1}});
  count_ = 0;
  for (const Slot& s : old)
    if (s.merge.rank >= 0) insert(int32_t(s.key >> 32), int32_t(s.key & 0xFFFFFFFFu), s.merge.rank, s.merge.merged_id);
}

void MergeTable::grow() { reserve(std::max<size_t>(16, count_ * 2 + 2)); }

bool MergeTable::insert(int32_t left, int32_t right, int32_t rank, int32_t merged_id) {
  if ((count_ + 1) * 2 > slots_.size()) grow();
  uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  size_t mask = slots_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (s.merge.rank < 0) {
      s = Slot{key, Merge{rank, merged_id}};
      ++count_;
      return true;
    }
    if (s.key == key) return false;
  }
}

MergeTable::Merge MergeTable::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return Merge{-1, -1};
  uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  size_t mask = slots_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.merge.rank < 0) return Merge{-1, -1};
    if (s.key == key) return s.merge;
  }
}

void bpe_encode_bytes(std::string_view piece, const TokenRankMap& ranks, std::vector<int32_t>& out) {
  if (piece.empty()) return;
  int32_t whole = ranks.find(piece);
  if (whole >= 0) {
    out.push_back(whole);
    return;
  }
  thread_local std::vector<Symbol> syms;
  syms.clear();
  for (uint32_t i = 0; i < piece.size(); ++i) syms.push_back(Symbol{i, i + 1, -1});
  ByteMerger merger{piece, ranks};
  if (piece.size() <= kShortPiece) merge_short(syms, merger, out);
  else merge_long(syms, merger, out);
  release_if_huge(syms);
}

void bpe_merge_ids(std::vector<int32_t>& ids, const MergeTable& merges, std::vector<int32_t>& out) {
  thread_local std::vector<Symbol> syms;
  syms.clear();
  for (uint32_t i = 0; i < ids.size(); ++i) syms.push_back(Symbol{i, i + 1, ids[i]});
  IdMerger merger{merges};
  if (ids.size() <= kShortPiece) merge_short(syms, merger, out);
  else merge_long(syms, merger, out);
  release_if_huge(syms);
}

}  // namespace sluice::tokenizer
