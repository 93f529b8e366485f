// Byte-pair encoding core shared by both file formats: a compact hash map from token bytes to rank,
// a (left id, right id) -> merge table, and the merge loop ("lowest rank first, leftmost on ties").
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::tokenizer {

// Open-addressing map from byte strings to non-negative ranks; all keys live in one buffer.
class TokenRankMap {
 public:
  void reserve(size_t count);
  // Returns false (and changes nothing) when the bytes are already present.
  bool insert(std::string_view bytes, int32_t rank);
  // The rank of `bytes`, or -1.
  int32_t find(std::string_view bytes) const;
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint32_t offset;
    uint32_t length;
    int32_t rank;  // -1: empty
    uint32_t tag;  // high hash bits, compared before the bytes
  };
  void grow();
  std::string blob_;
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

// Map from an ordered pair of token ids to (merge rank, merged id), for tokenizer.json merges.
class MergeTable {
 public:
  struct Merge {
    int32_t rank;  // -1: no merge
    int32_t merged_id;
  };
  void reserve(size_t count);
  // Returns false when the pair is already present (the first, lower-rank entry is kept).
  bool insert(int32_t left, int32_t right, int32_t rank, int32_t merged_id);
  Merge find(int32_t left, int32_t right) const;

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  void grow();
  std::vector<Slot> slots_;
  size_t count_ = 0;
};

// tiktoken rule: whole-piece lookup first, then repeatedly merge the adjacent pair whose
// concatenation has the lowest rank (leftmost on ties); appends the ranks (= ids) to `out`.
// Every single byte must be in `ranks` (loaders check this). O(n log n) for long pieces.
void bpe_encode_bytes(std::string_view piece, const TokenRankMap& ranks, std::vector<int32_t>& out);

// Hugging Face BPE rule on initial symbols (one id per byte-level character): repeatedly apply the
// merge with the lowest merge rank (leftmost on ties); appends the resulting ids to `out`.
void bpe_merge_ids(std::vector<int32_t>& symbols, const MergeTable& merges, std::vector<int32_t>& out);

}  // namespace sluice::tokenizer
