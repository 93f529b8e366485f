// Streaming expert provider: slot arena, hit/miss handling, prefetch, eviction, counters.
#include "store/streaming_experts.h"

#include <unistd.h>

#include <algorithm>
#include <new>

#include "core/error.h"
#include "store/remote_fill.h"

namespace sluice::store {

uint64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

StreamingExperts::StreamingExperts(Manifest manifest, const StreamOptions& opt)
    : m_(std::move(manifest)),
      opt_(opt),
      policy_(m_.num_layers, opt.prefetch, opt.prefetch_layers, opt.prefetch_min_precision, opt.prefetch_when_idle),
      heat_(m_.num_layers, m_.num_experts) {
  const uint64_t slot = m_.layout.slot_bytes;
  // A budget beyond the machine's memory can never be met: refuse it with the numbers, rather
  // than fail in the allocator (or swap) later.
  const uint64_t physical = physical_memory_bytes();
  if (physical && opt_.cache_bytes > physical)
    fail("--cache-gb: the expert cache budget of ", opt_.cache_bytes / 1e9, " GB is more than this machine's ",
         physical / 1e9, " GB of memory");
  size_t n = size_t(opt_.cache_bytes / slot);
  if (n < 2) fail("--cache-gb: the expert cache must hold at least 2 experts (", 2 * slot / 1e6, " MB)");
  // The arena is touched at load, so it is never larger than the bank it caches: with every
  // expert in a slot of its own nothing is ever evicted, and more slots would only cost memory.
  uint64_t bank_experts = 0;
  for (const auto& layer : m_.holders) bank_experts += layer.size();
  n = std::max<size_t>(1, std::min<size_t>(n, size_t(bank_experts)));
  // Half the slots are reserved for prefetch when it is on.
  max_batch_ = opt_.prefetch ? std::max<size_t>(1, n / 2) : n;
  try {
    arena_ = allocate_touched(n * slot, ExpertLayout::kAlign);
  } catch (const std::bad_alloc&) {
    fail("--cache-gb: cannot allocate the expert cache (", n, " experts, ", n * slot / 1e9, " GB)");
  }
  slots_.resize(n);
  where_.assign(size_t(m_.num_layers * m_.num_experts), -1);
  counters_.reads_by_layer.assign(size_t(m_.num_layers), 0);
  if (!opt_.heat_file.empty()) heat_.load(opt_.heat_file);
  if (opt_.source) opt_.source->adopt(m_);
  reader_ = std::make_unique<ExpertReader>(m_, opt_.reader);
  reader_->register_arena(arena_.get(), n * slot);
}

StreamingExperts::~StreamingExperts() {
  // Let reads still in flight land before the arena goes away.
  for (auto& s : slots_)
    if (s.ticket) {
      try {
        reader_->wait(s.ticket);
      } catch (const Error&) {
      }
    }
}

void StreamingExperts::save_heat() const {
  if (!opt_.heat_file.empty()) heat_.save(opt_.heat_file);
}

ExpertProvider::ReadTotals StreamingExperts::read_totals() const {
  return ReadTotals{.requests = counters_.requests,
                    .misses = counters_.misses,
                    .bytes_read = counters_.bytes_read,
                    .expert_bytes = m_.layout.slot_bytes,
                    .bytes_per_second = reader_->total_bandwidth()};
}

uint64_t StreamingExperts::missing() const {
  uint64_t n = 0;
  for (const auto& layer : m_.holders)
    for (const auto& hs : layer) n += !hs.empty() && !hs[0].local;
  return n;
}

int StreamingExperts::find(int layer, int expert) const { return where_[size_t(layer * m_.num_experts + expert)]; }

void StreamingExperts::reap() {
  for (auto& sl : slots_) {
    if (!sl.ticket || sl.pins > 0 || !reader_->ready(sl.ticket)) continue;
    uint64_t t = sl.ticket;
    sl.ticket = 0;
    try {
      reader_->wait(t);
    } catch (const Error&) {  // a failed prefetch: forget the slot; a demand read will retry
      where_[size_t(sl.layer * m_.num_experts + sl.expert)] = -1;
      sl.layer = sl.expert = -1;
      sl.prefetched = false;
    }
  }
}

int StreamingExperts::victim() {
  // Score: recency in layer passes plus a bonus for heat; pinned, in-flight and unclaimed
  // prefetched slots are never taken.
  int best = -1;
  double best_score = 0;
  for (int i = 0; i < int(slots_.size()); ++i) {
    const Slot& s = slots_[size_t(i)];
    if (s.pins > 0 || s.ticket || s.prefetched) continue;
    if (s.layer < 0) return i;
    double score = double(s.last_use) + 16.0 * heat_.get(s.layer, s.expert);
    if (best < 0 || score < best_score) {
      best = i;
      best_score = score;
    }
  }
  return best;
}

bool StreamingExperts::cancel_prefetch(Slot& s) {
  if (!s.prefetched || !s.ticket || !reader_->cancel(s.ticket)) return false;
  where_[size_t(s.layer * m_.num_experts + s.expert)] = -1;
  counters_.prefetch_cancelled += 1;
  counters_.bytes_read -= m_.layout.slot_bytes;
  counters_.reads_by_layer[size_t(s.layer)] -= 1;
  s = Slot{};
  return true;
}

void StreamingExperts::assign(int slot, int layer, int expert) {
  Slot& s = slots_[size_t(slot)];
  if (s.layer >= 0) where_[size_t(s.layer * m_.num_experts + s.expert)] = -1;
  if (s.unused) counters_.prefetch_wasted += 1;
  s.unused = false;
  s.further = false;
  s.layer = layer;
  s.expert = expert;
  s.last_use = tick_;
  where_[size_t(layer * m_.num_experts + expert)] = slot;
}

void StreamingExperts::begin(int layer, std::span<const int32_t> experts) {
  release(layer);  // a begin without release (an earlier error) must not leak pins
  if (layer < 0 || layer >= m_.num_layers || m_.holders[size_t(layer)].empty())
    fail("layer ", layer, " has no routed experts in the manifest");
  if (experts.size() > max_batch_) fail("expert request of ", experts.size(), " exceeds the cache batch ", max_batch_);
  ++tick_;
  heat_.record(layer, experts.data(), experts.size());
  if (opt_.prefetch_when_idle)  // the period since the last request, for the idle guesses
    policy_.request_at(std::chrono::steady_clock::now(), reader_->idle_seconds(), reader_->busy_bandwidth());
  // Each distance's last guess at this layer is scored; the next layer's recall (the request is
  // ascending and a guess holds each expert once).
  bool scored = false;
  const size_t right = policy_.score(layer, experts, &scored);
  if (scored) {
    counters_.predicted_correct += right;
    counters_.actual_total += experts.size();
  }
  // Unclaimed prefetches of this layer were wrong guesses: reads no drive has started are dropped,
  // the others become ordinary cache entries when they land.
  for (auto& sl : slots_)
    if (sl.prefetched && sl.layer == layer && !std::binary_search(experts.begin(), experts.end(), sl.expert) &&
        !cancel_prefetch(sl))
      sl.prefetched = false;
  reap();
  std::vector<int>& slot_of = slot_of_;
  slot_of.assign(experts.size(), -1);
  // Pin hits first so misses cannot evict them.
  for (size_t i = 0; i < experts.size(); ++i) {
    int32_t e = experts[i];
    if (e < 0 || e >= m_.num_experts) fail("expert ", e, " of layer ", layer, " does not exist");
    int s = find(layer, e);
    counters_.requests += 1;
    if (s >= 0) {
      Slot& sl = slots_[size_t(s)];
      sl.pins += 1;
      sl.last_use = tick_;
      if (sl.prefetched) {
        counters_.prefetch_used += 1;
        counters_.prefetch_further_used += sl.further;
        sl.prefetched = false;
      }
      sl.unused = false;
      if (sl.ticket) reader_->promote(sl.ticket);  // still queued as a guess: now it is needed
      counters_.hits += 1;
      slot_of[i] = s;
    }
  }
  std::vector<size_t>& to_fetch = to_fetch_;  // misses with no local copy: fetched from the source below
  to_fetch.clear();
  for (size_t i = 0; i < experts.size(); ++i) {
    if (slot_of[i] >= 0) continue;
    int s = victim();
    if (s < 0) {
      // Unclaimed prefetches (of other layers) are the only other candidates: give them up,
      // dropping reads not started and waiting for the others to land if need be.
      for (auto& sl : slots_)
        if (sl.pins == 0 && !cancel_prefetch(sl)) sl.prefetched = false;
      reap();
      s = victim();
      for (size_t k = 0; s < 0 && k < slots_.size(); ++k) {
        Slot& sl = slots_[k];
        if (sl.pins > 0 || !sl.ticket) continue;
        uint64_t t = sl.ticket;
        sl.ticket = 0;
        try {
          reader_->wait(t);
        } catch (const Error&) {
          where_[size_t(sl.layer * m_.num_experts + sl.expert)] = -1;
          sl.layer = sl.expert = -1;
        }
        s = victim();
      }
    }
    if (s < 0) fail("expert cache is full of pinned or in-flight experts; raise --cache-gb");
    assign(s, layer, experts[i]);
    Slot& sl = slots_[size_t(s)];
    sl.pins = 1;
    if (m_.of(layer, experts[i])[0].local)
      sl.ticket = reader_->submit(layer, experts[i], data(s));
    else
      to_fetch.push_back(i);
    counters_.misses += 1;
    counters_.bytes_read += m_.layout.slot_bytes;
    counters_.reads_by_layer[size_t(layer)] += 1;
    slot_of[i] = s;
  }
  pinned_now_ = slot_of;  // release() unpins them, whatever next_ready got to
  if (!to_fetch.empty()) fetch_missing(layer, experts, slot_of, to_fetch);
  handed_.assign(experts.size(), false);
  handed_count_ = 0;
}

int StreamingExperts::next_ready(device::ExpertView* out) {
  const size_t n = pinned_now_.size();
  if (handed_count_ >= n) return -1;
  // Experts already in RAM first, in order; then whichever read lands first.
  for (size_t i = 0; i < n; ++i) {
    if (handed_[i] || slots_[size_t(pinned_now_[i])].ticket) continue;
    handed_[i] = true;
    ++handed_count_;
    *out = m_.layout.views(data(pinned_now_[i]));
    return int(i);
  }
  std::vector<uint64_t>& tickets = tickets_;
  std::vector<size_t>& index = ticket_index_;
  tickets.clear();
  index.clear();
  for (size_t i = 0; i < n; ++i)
    if (!handed_[i]) {
      tickets.push_back(slots_[size_t(pinned_now_[i])].ticket);
      index.push_back(i);
    }
  size_t got = 0;
  try {
    got = reader_->wait_any(tickets);
  } catch (const ReadFailure& f) {
    Slot& sl = slots_[size_t(pinned_now_[index[f.position]])];
    const int layer = sl.layer;
    sl.ticket = 0;
    where_[size_t(sl.layer * m_.num_experts + sl.expert)] = -1;
    sl.layer = sl.expert = -1;
    release(layer);
    throw Error(f.what());
  }
  size_t i = index[got];
  slots_[size_t(pinned_now_[i])].ticket = 0;
  handed_[i] = true;
  ++handed_count_;
  *out = m_.layout.views(data(pinned_now_[i]));
  return int(i);
}

void StreamingExperts::fetch_missing(int layer, std::span<const int32_t> experts, const std::vector<int>& slot_of,
                                     const std::vector<size_t>& which) {
  std::vector<int32_t> ids;
  std::vector<std::byte*> dst;
  for (size_t i : which) {
    ids.push_back(experts[i]);
    dst.push_back(data(slot_of[i]));
  }
  try {
    fill_from_source(opt_.source.get(), m_, layer, ids, dst);
  } catch (...) {
    // Forget the slots of this request (their bytes are not valid) and unpin everything it pinned.
    for (size_t i : which) {
      Slot& sl = slots_[size_t(slot_of[i])];
      where_[size_t(sl.layer * m_.num_experts + sl.expert)] = -1;
      sl.layer = sl.expert = -1;
    }
    for (int s : slot_of)
      if (s >= 0) slots_[size_t(s)].pins = std::max(0, slots_[size_t(s)].pins - 1);
    pinned_now_.clear();  // already unpinned: a later release() must not unpin them again
    throw;
  }
  counters_.fetched += ids.size();
}

void StreamingExperts::release(int) {
  for (int s : pinned_now_)
    if (s >= 0) slots_[size_t(s)].pins = std::max(0, slots_[size_t(s)].pins - 1);
  pinned_now_.clear();
  handed_.clear();
  handed_count_ = 0;
}

bool StreamingExperts::pin_resident(int layer, int expert, device::ExpertView* out) {
  if (layer < 0 || layer >= m_.num_layers || expert < 0 || expert >= m_.num_experts) return false;
  const int s = find(layer, expert);
  if (s < 0 || slots_[size_t(s)].ticket) return false;  // not in RAM, or its read has not been reaped
  slots_[size_t(s)].pins += 1;
  *out = m_.layout.views(data(s));
  return true;
}

void StreamingExperts::unpin(int layer, int expert) {
  const int s = find(layer, expert);
  if (s >= 0) slots_[size_t(s)].pins = std::max(0, slots_[size_t(s)].pins - 1);
}

int StreamingExperts::lookahead() const {
  // Beyond the next layer only while the drives idle: those guesses get drive time nothing else
  // wants (demand reads still queue ahead of them, and prefetches never fill a home's queue).
  return policy_.lookahead(policy_.layers_ahead() > 1 && reader_->idle());
}

void StreamingExperts::prefetch(int layer, std::span<const int32_t> experts, int distance) {
  if (layer < 0 || layer >= m_.num_layers || m_.holders[size_t(layer)].empty()) return;
  if (distance < 1 || distance > policy_.layers_ahead()) return;
  policy_.remember(layer, distance, experts);
  if (distance == 1) counters_.predicted_total += experts.size();
  // A guess beyond the next layer is read only while the drives idle (it is still scored): the
  // model asked for it while they did, but the nearer guesses handed over since may have started
  // reads.
  const bool idle = reader_->idle();
  if (distance > 1 && !idle) return;
  // Next-layer guesses handed over while the drives idle may skip the precision gate, as many
  // as the drives' usual idle time in a layer can read, each only if its own read fits in that
  // time (--prefetch-idle; DriveSpare).
  const double slot = double(m_.layout.slot_bytes);
  PrefetchPolicy::Allowance spare = policy_.allowance(distance, idle);
  size_t budget = slots_.size() - std::min(slots_.size(), max_batch_);
  reap();
  for (size_t r = 0; r < experts.size(); ++r) {
    const int32_t e = experts[r];
    if (budget == 0) break;
    const bool gated = !policy_.earned(layer, distance, r);  // a guess that may not pay
    if (gated && !spare.affords(slot)) {
      counters_.prefetch_suppressed += 1;
      continue;
    }
    if (e < 0 || e >= m_.num_experts || find(layer, e) >= 0) continue;
    if (!m_.of(layer, e)[0].local) continue;  // fetched from the source only when really used
    if (gated && reader_->solo_seconds(layer, e) > spare.window_seconds) {  // would still be reading when needed
      counters_.prefetch_suppressed += 1;
      continue;
    }
    int s = victim();
    if (s < 0) break;
    if (gated) {
      spare.bytes -= slot;
      counters_.prefetch_idle += 1;
    }
    assign(s, layer, e);
    Slot& sl = slots_[size_t(s)];
    sl.prefetched = true;
    sl.unused = true;
    sl.further = distance > 1;
    sl.ticket = reader_->submit(layer, e, data(s), /*urgent=*/false);
    counters_.prefetch_issued += 1;
    counters_.prefetch_further += distance > 1;
    counters_.bytes_read += m_.layout.slot_bytes;
    counters_.reads_by_layer[size_t(layer)] += 1;
    --budget;
  }
}

}  // namespace sluice::store
