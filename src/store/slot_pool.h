// A pool of reusable slots addressed by ids, for bookkeeping that comes and goes per expert read
// (the reader's records and part reads): a freed slot keeps its element, so the vectors and strings
// inside it keep their capacity and the next read reuses them without allocating. An id carries its
// slot's generation, so an id whose slot was freed (and perhaps reused) is no longer found, as a
// key erased from a map is not. Ids are never 0. A reference to a slot stays valid while the slot
// is taken, whatever else is taken meanwhile (slots live in a deque). Not thread-safe: the owner's
// lock guards it.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

namespace sluice::store {

template <typename T>
class SlotPool {
 public:
  // A free slot (grown only when every slot is taken) and its new id. The element is as its last
  // user left it: the caller resets every field it reads.
  T& take(uint64_t& id) {
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = uint32_t(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[index];
    s.live = true;
    ++live_;
    id = (uint64_t(s.generation) << 32) | index;
    return s.value;
  }
  T* find(uint64_t id) {
    const uint32_t index = uint32_t(id), generation = uint32_t(id >> 32);
    if (index >= slots_.size()) return nullptr;
    Slot& s = slots_[index];
    return s.live && s.generation == generation ? &s.value : nullptr;
  }
  const T* find(uint64_t id) const { return const_cast<SlotPool*>(this)->find(id); }
  // Frees id's slot (it must be live).
  void release(uint64_t id) {
    Slot& s = slots_[uint32_t(id)];
    s.live = false;
    ++s.generation;  // never 0 again after wrapping: generations start at 1 and skip 0
    if (s.generation == 0) s.generation = 1;
    --live_;
    free_.push_back(uint32_t(id));
  }
  size_t size() const { return live_; }
  bool empty() const { return live_ == 0; }

 private:
  struct Slot {
    T value{};
    uint32_t generation = 1;
    bool live = false;
  };
  std::deque<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace sluice::store
