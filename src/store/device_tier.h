// The expert tier in a device's own memory (HBM): routed experts kept in device slots in front of
// another provider (the RAM store). A hit hands out a view of its slot; a miss takes the inner
// provider's view as it lands and copies its bytes, piece by piece and unchanged, into the least
// recently used slot that no lease holds, on the device's copy queue, and hands out a view of the
// slot whose `ready` fence is that copy's. Every kernel therefore computes on the same bytes
// whichever tier held the expert: the tier changes no bit.
//
// The lease (expert_provider.h). A slot handed out stays pinned until release(). release() takes
// the compute queue's fence (after the work that read the views) as each slot's last use; a
// slot's next copy waits for it on the device, so reusing a slot never blocks the host. The
// inner provider's lease ends only after this lease's copies have landed (their sources are its
// RAM slots), which is the one place the host waits. A miss that finds no free slot (a budget
// below one group of experts) is handed out as the inner provider's host view (the device stages
// it, as without a tier) and release() then also waits for the compute fence.
//
// The inner provider's host memory should be registered with the device (Device::pin_host) by
// whoever owns it, so the copies run at the link's rate.
//
// Copies ahead. The model's guesses at the next layer's routes (prefetch(), distance 1) are kept;
// when a lease is released, those of the guessed experts that the inner provider has in RAM now
// (pin_resident: no read is started for them) are copied into slots at once, behind the released
// layer's copies on the copy queue, so the link works while the device computes the rest of this
// layer and the next layer's attention. A right guess is a hit at the next begin() whose ready
// fence is that copy's; a wrong one costs link time and a slot, and when the link is what limits
// a step (it is, whenever most experts miss) it saves nothing: the expert would have been copied
// anyway, only later. So, as with reads ahead from drives, a guess is copied only while the
// guesses of its rank at that layer have been right at least `ahead_precision` of the time lately
// (an average over the last few, scored at every begin() whether copied or not). The inner
// provider's RAM copies stay pinned until the release after, when the host has waited for the
// copy queue anyway. Guesses never change which bytes a kernel reads.
//
// The host's share. A plan fixed at construction names, in every layer, round(share x experts)
// experts that passes of at most kHostPassRows rows (decode steps and verify passes) never copy:
// they are handed out as the inner provider's host views marked compute_on_host, and the model
// computes them on the host's cores while the link carries the rest (moe.cpp). Longer passes
// (prefill slices) copy every expert they miss and compute it on the device: there each expert
// serves many rows, which the GPU computes far faster than the cores while its copy costs the
// same. The plan is a function of (layer, expert) and the pass's kind alone (an order by a hash of
// both), never of what the tiers hold or of timing, so two runs give the same bits; those
// experts' rows are the CPU kernels' bits, within the ISA tolerance of the GPU's.
// store/hybrid_plan.h chooses the share from the machine's measured rates.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "device/device.h"
#include "store/expert_provider.h"

namespace sluice::store {

struct TierCounters {
  uint64_t requests = 0, hits = 0;  // experts asked for, found in device slots
  uint64_t copies = 0, bytes_copied = 0, evictions = 0;
  uint64_t passthrough = 0;  // misses handed out from host memory (no free slot)
  uint64_t on_host = 0;      // handed out for the host's cores (the plan's share)
  // Copies ahead: predicted experts of the next layer copied from RAM while this layer computes,
  // those then asked for (hits they made), and those evicted before anyone asked (link time spent
  // for nothing).
  uint64_t ahead = 0, ahead_used = 0, ahead_wasted = 0;
  uint64_t slots = 0, slot_bytes = 0;
};

class DeviceTier : public ExpertProvider {
 public:
  // budget_bytes of device memory in slots sized by the first expert copied; the bank has `layers`
  // x `experts` routed experts. Device memory is taken at the first miss, and less than the budget
  // when the device has less free (never a failure: a tier of 0 slots passes every miss through).
  DeviceTier(device::Device& device, ExpertProvider& inner, uint64_t budget_bytes, int layers, int experts,
             double host_share = 0, double ahead_precision = 0.95);
  ~DeviceTier() override;
  DeviceTier(const DeviceTier&) = delete;
  DeviceTier& operator=(const DeviceTier&) = delete;

  void begin(int layer, std::span<const int32_t> experts) override;
  int next_ready(device::ExpertView* out) override;
  void release(int layer) override;
  bool pass_rows(int64_t rows) override {
    host_pass_ = rows <= kHostPassRows;
    return host_pass_ && host_share_;
  }
  void prefetch(int layer, std::span<const int32_t> experts, int distance) override;
  bool pin_resident(int layer, int expert, device::ExpertView* out) override {
    return inner_.pin_resident(layer, expert, out);
  }
  void unpin(int layer, int expert) override { inner_.unpin(layer, expert); }
  int lookahead() const override { return inner_.lookahead(); }
  size_t max_batch() const override { return inner_.max_batch(); }
  ReadTotals read_totals() const override { return inner_.read_totals(); }

  const TierCounters& counters() const { return counters_; }
  // Passes of at most this many rows compute the plan's share on the host's cores.
  static constexpr int64_t kHostPassRows = 8;
  // Whether the plan computes expert e of layer l on the host's cores (in passes of at most
  // kHostPassRows rows).
  bool on_host(int layer, int expert) const { return host_plan_[key(layer, expert)]; }

 private:
  struct Slot {
    int key = -1;               // layer * experts + expert, or -1 (empty)
    bool leased = false;        // handed out in the open lease
    device::ExpertView view;   // on the device; view.ready = the copy that filled it
    device::Fence last_use;    // the compute fence of the last lease that read it
    bool ahead = false;         // copied from a guess and not yet asked for
    int prev = -1, next = -1;   // recency list, most recent at head_
  };
  // Expert e of layer l's index into where_ and host_plan_ (and a slot's key).
  size_t key(int layer, int expert) const { return size_t(layer) * size_t(experts_) + size_t(expert); }
  void allocate(const device::ExpertView& first);
  int victim() const;  // the least recently used slot not leased, or -1
  void touch(int slot);
  void unlink(int slot);
  device::ExpertView fill(int slot, const device::ExpertView& host);
  int take(int layer, int expert);  // a victim slot re-keyed to (layer, expert), or -1
  void copy_ahead(int layer);       // the kept guesses at `layer` that RAM holds, into slots
  void unpin_ahead();               // after their copies have landed

  device::Device& device_;
  ExpertProvider& inner_;
  uint64_t budget_;
  int layers_, experts_;
  std::byte* mem_ = nullptr;
  size_t slot_bytes_ = 0;
  bool allocated_ = false;
  std::vector<Slot> slots_;
  std::vector<int> where_;  // key -> slot or -1
  std::vector<uint8_t> host_plan_;  // key -> computed on the host's cores
  bool host_pass_ = true;           // the current pass is short enough for the plan (pass_rows)
  bool host_share_ = false;         // the plan names any expert
  int head_ = -1, tail_ = -1;
  // The open lease.
  int layer_ = -1;
  std::vector<int> leased_;                  // slots handed out or to hand out
  std::vector<std::pair<int, int>> hits_;    // (index in begin's list, slot), not yet handed out
  size_t next_hit_ = 0;
  std::vector<int32_t> miss_experts_;        // asked of the inner provider
  std::vector<int> miss_index_;              // their indices in begin's list
  bool inner_open_ = false, passed_through_ = false;
  device::Fence last_copy_;
  std::vector<device::Device::CopyPiece> pieces_;
  std::vector<int32_t> prefetch_;
  int guess_layer_ = -1;             // the last distance-1 guess, in confidence order
  std::vector<int32_t> guess_;
  bool guess_copied_ = false;        // copy_ahead has run for it
  static constexpr size_t kRanks = 64;
  std::vector<double> precision_;    // [layer][rank]: how often lately a guess of that rank was asked for
  double ahead_precision_;
  std::vector<std::pair<int, int>> ahead_pins_;  // (layer, expert) pinned in the inner provider
  device::Fence ahead_copy_;
  TierCounters counters_;
};

}  // namespace sluice::store
