#include "store/device_tier.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "store/guess_precision.h"

namespace sluice::store {
namespace {

constexpr size_t kAlign = 256;  // each piece of a slot starts aligned, as the kernels' loads want
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

size_t device_bytes(device::ExpertView v) {
  size_t n = 0;
  for (device::Weight* w : {&v.gate, &v.up, &v.down})
    device::for_each_piece(*w, [&](const void*&, size_t bytes) { n += aligned(bytes); });
  return n;
}

}  // namespace

DeviceTier::DeviceTier(device::Device& device, ExpertProvider& inner, uint64_t budget_bytes, int layers, int experts,
                       double host_share, double ahead_precision)
    : device_(device),
      inner_(inner),
      budget_(budget_bytes),
      layers_(layers),
      experts_(experts),
      ahead_precision_(ahead_precision) {
  SLUICE_CHECK(layers > 0 && experts > 0, "device tier of a bank of ", layers, " x ", experts, " experts");
  SLUICE_CHECK(host_share >= 0 && host_share <= 1, "the host's share of the experts must be in 0..1 (got ", host_share,
               ")");
  where_.assign(size_t(layers) * size_t(experts), -1);
  precision_.assign(size_t(layers) * kRanks, 0.0);
  host_plan_.assign(where_.size(), 0);
  // Per layer, the round(share x experts) experts first in an order by a hash of (layer, expert).
  const int n = int(std::lround(host_share * experts));
  std::vector<std::pair<uint32_t, int>> order(static_cast<size_t>(experts));
  for (int l = 0; l < layers; ++l) {
    for (int e = 0; e < experts; ++e) {
      uint32_t h = uint32_t(l) * 0x9E3779B1u ^ uint32_t(e) * 0x85EBCA77u;
      h ^= h >> 15;
      h *= 0x2C1B3C6Du;
      h ^= h >> 12;
      order[size_t(e)] = {h, e};
    }
    std::sort(order.begin(), order.end());
    for (int i = 0; i < n; ++i) host_plan_[key(l, order[size_t(i)].second)] = 1;
    host_share_ = host_share_ || n > 0;
  }
}

DeviceTier::~DeviceTier() {
  // Copies still in flight read the inner provider's RAM and write the slots.
  if (!ahead_pins_.empty()) device_.sync(ahead_copy_);
  if (mem_) device_.free_bytes(mem_);
}

// The slots, sized by the first expert copied (every routed expert of a bank has the same shape
// and types; a larger one later is passed through). Asks for the budget and halves on refusal.
void DeviceTier::allocate(const device::ExpertView& first) {
  allocated_ = true;
  slot_bytes_ = device_bytes(first);
  if (slot_bytes_ == 0) return;
  uint64_t n = std::min<uint64_t>(budget_ / slot_bytes_, uint64_t(layers_) * uint64_t(experts_));
  while (n > 0 && !(mem_ = static_cast<std::byte*>(device_.alloc_bytes(size_t(n) * slot_bytes_)))) n /= 2;
  slots_.resize(size_t(n));
  for (size_t i = 0; i < slots_.size(); ++i) touch(int(i));
  counters_.slots = n;
  counters_.slot_bytes = slot_bytes_;
}

void DeviceTier::unlink(int s) {
  Slot& x = slots_[size_t(s)];
  if (x.prev >= 0) slots_[size_t(x.prev)].next = x.next;
  else if (head_ == s) head_ = x.next;
  if (x.next >= 0) slots_[size_t(x.next)].prev = x.prev;
  else if (tail_ == s) tail_ = x.prev;
  x.prev = x.next = -1;
}

void DeviceTier::touch(int s) {
  unlink(s);
  Slot& x = slots_[size_t(s)];
  x.next = head_;
  if (head_ >= 0) slots_[size_t(head_)].prev = s;
  head_ = s;
  if (tail_ < 0) tail_ = s;
}

int DeviceTier::victim() const {
  for (int s = tail_; s >= 0; s = slots_[size_t(s)].prev)
    if (!slots_[size_t(s)].leased) return s;
  return -1;
}

device::ExpertView DeviceTier::fill(int s, const device::ExpertView& host) {
  Slot& slot = slots_[size_t(s)];
  device::ExpertView d = host;
  pieces_.clear();
  std::byte* at = mem_ + size_t(s) * slot_bytes_;
  // Each piece moves into the slot; the device view points at it there.
  for (device::Weight* w : {&d.gate, &d.up, &d.down}) {
    if (w->empty()) continue;
    device::for_each_piece(*w, [&](const void*& member, size_t bytes) {
      pieces_.push_back({at, member, bytes});
      member = at;
      at += aligned(bytes);
    });
    w->place = device::Place::Device;
  }
  d.ready = device_.copy_in(pieces_, slot.last_use);
  slot.view = d;
  ++counters_.copies;
  for (const auto& p : pieces_) counters_.bytes_copied += p.bytes;
  return d;
}

void DeviceTier::begin(int layer, std::span<const int32_t> experts) {
  SLUICE_CHECK(layer >= 0 && layer < layers_, "device tier: layer ", layer, " outside 0..", layers_ - 1);
  layer_ = layer;
  leased_.clear();
  hits_.clear();
  next_hit_ = 0;
  miss_experts_.clear();
  miss_index_.clear();
  passed_through_ = false;
  if (guess_layer_ == layer) {  // score the guess at this layer, rank by rank
    score_guess(guess_, experts, &precision_[size_t(layer) * kRanks], kRanks);
    guess_layer_ = -1;
  }
  for (size_t i = 0; i < experts.size(); ++i) {
    SLUICE_CHECK(experts[i] >= 0 && experts[i] < experts_, "device tier: expert ", experts[i], " outside 0..",
                 experts_ - 1);
    // The plan's experts are computed on the host's cores in a short pass even when a longer one
    // left them in a slot: where an expert is computed never depends on what the tier holds.
    const int s = host_pass_ && on_host(layer, experts[i]) ? -1 : where_[key(layer, experts[i])];
    ++counters_.requests;
    if (s >= 0) {
      ++counters_.hits;
      if (slots_[size_t(s)].ahead) {
        ++counters_.ahead_used;
        slots_[size_t(s)].ahead = false;
      }
      slots_[size_t(s)].leased = true;
      leased_.push_back(s);
      hits_.emplace_back(int(i), s);
      touch(s);
    } else {
      miss_experts_.push_back(experts[i]);
      miss_index_.push_back(int(i));
    }
  }
  inner_open_ = !miss_experts_.empty();
  if (inner_open_) inner_.begin(layer, miss_experts_);
}

int DeviceTier::next_ready(device::ExpertView* out) {
  if (next_hit_ < hits_.size()) {
    const auto [i, s] = hits_[next_hit_++];
    *out = slots_[size_t(s)].view;
    return i;
  }
  if (!inner_open_) return -1;
  device::ExpertView host;
  const int got = inner_.next_ready(&host);
  if (got < 0) return -1;
  const int i = miss_index_[size_t(got)];
  if (host_pass_ && on_host(layer_, miss_experts_[size_t(got)])) {
    ++counters_.on_host;
    *out = host;
    out->compute_on_host = true;
    return i;
  }
  if (!allocated_) allocate(host);
  const int s = device_bytes(host) <= slot_bytes_ ? take(layer_, miss_experts_[size_t(got)]) : -1;
  if (s < 0) {
    ++counters_.passthrough;
    passed_through_ = true;
    *out = host;
    return i;
  }
  slots_[size_t(s)].leased = true;
  leased_.push_back(s);
  *out = fill(s, host);
  last_copy_ = out->ready;
  return i;
}

int DeviceTier::take(int layer, int expert) {
  const int s = victim();
  if (s < 0) return -1;
  Slot& slot = slots_[size_t(s)];
  if (slot.key >= 0) {
    where_[size_t(slot.key)] = -1;
    ++counters_.evictions;
    if (slot.ahead) ++counters_.ahead_wasted;
  }
  slot.ahead = false;
  slot.key = int(key(layer, expert));
  where_[size_t(slot.key)] = s;
  touch(s);
  return s;
}

void DeviceTier::copy_ahead(int layer) {
  if (layer != guess_layer_ || guess_copied_ || layer >= layers_ || (allocated_ && slots_.empty())) return;
  guess_copied_ = true;
  // At most a third of the slots per layer, so a guess that covers a whole layer (a long prefill
  // pass) cannot flush what the layers after it will ask for.
  size_t budget = std::max<size_t>(1, slots_.size() / 3);
  const double* prec = &precision_[size_t(layer) * kRanks];
  for (size_t r = 0; r < guess_.size() && budget > 0; ++r) {
    const int32_t e = guess_[r];
    if (ahead_precision_ > 0 && (r >= kRanks || prec[r] < ahead_precision_)) continue;
    if (where_[key(layer, e)] >= 0 || (host_pass_ && on_host(layer, e))) continue;
    device::ExpertView host;
    if (!inner_.pin_resident(layer, e, &host)) continue;
    if (!allocated_) allocate(host);
    const int s = device_bytes(host) <= slot_bytes_ ? take(layer, e) : -1;
    if (s < 0) {
      inner_.unpin(layer, e);
      break;
    }
    ahead_pins_.emplace_back(layer, e);
    ahead_copy_ = fill(s, host).ready;
    slots_[size_t(s)].ahead = true;
    ++counters_.ahead;
    --budget;
  }
}

void DeviceTier::unpin_ahead() {
  if (ahead_pins_.empty()) return;
  device_.sync(ahead_copy_);
  for (const auto& [l, e] : ahead_pins_) inner_.unpin(l, e);
  ahead_pins_.clear();
}

void DeviceTier::release(int layer) {
  SLUICE_CHECK(layer == layer_, "device tier: release of layer ", layer, " while layer ", layer_, " is leased");
  const device::Fence done = device_.fence();  // after the work that read this lease's views
  for (int s : leased_) {
    slots_[size_t(s)].leased = false;
    slots_[size_t(s)].last_use = done;
  }
  leased_.clear();
  if (inner_open_) {
    device_.sync(last_copy_);                  // the copies read the inner provider's RAM slots
    if (passed_through_) device_.sync(done);  // so did the work on views handed out from them
    inner_.release(layer);
    inner_open_ = false;
  }
  layer_ = -1;
  unpin_ahead();  // the last layer's guesses: their copies were queued before this layer's
  copy_ahead(layer + 1);
}

void DeviceTier::prefetch(int layer, std::span<const int32_t> experts, int distance) {
  if (layer < 0 || layer >= layers_) return;
  if (distance == 1) {
    guess_layer_ = layer;
    guess_copied_ = false;
    guess_.clear();
    for (int32_t e : experts)
      if (e >= 0 && e < experts_) guess_.push_back(e);
  }
  prefetch_.clear();  // experts already on the device need no read into RAM
  for (int32_t e : experts)
    if (e >= 0 && e < experts_ && where_[key(layer, e)] < 0) prefetch_.push_back(e);
  inner_.prefetch(layer, prefetch_, distance);
}

}  // namespace sluice::store
