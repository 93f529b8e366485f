// The one narrow door through which the model reaches routed experts. The model asks for the
// experts one layer needs for a pass (the union over all rows of the pass) and gets weight views
// back; ResidentExperts points into the checkpoint, StreamingExperts reads them from drives
// through a RAM cache. Nothing about files, drives or caches crosses this interface.
//
// The lease contract. begin(layer, experts) opens a lease on the listed experts; each view that
// next_ready() returns is valid on its place once its `ready` fence has passed and stays valid
// (its bytes are not evicted, moved or overwritten) until release(layer). The caller issues the
// device work that reads the views, then records a fence of its compute queue and calls release()
// only after that fence (on the CPU every op has finished when it returns, so release follows the
// last op directly; a GPU tier frees a slot only when the fence recorded at release has passed).
// One lease is open at a time per provider; begin() of the next group implies nothing about the
// previous one, which must have been released. Providers are used from one thread.
#pragma once
#include <cstdint>
#include <cstddef>
#include <span>
#include <vector>

#include "device/weight.h"

namespace sluice::store {

class ExpertProvider {
 public:
  virtual ~ExpertProvider() = default;
  // Starts making `experts` (unique, ascending) of `layer` available: those in RAM at once, the
  // rest as their reads land.
  virtual void begin(int layer, std::span<const int32_t> experts) = 0;
  // Returns the index (into begin's list) of an expert that is ready, each exactly once, in
  // whatever order they land, and fills *out with its views (valid until release); -1 once all
  // were returned. The model computes each expert as it arrives and sums per row in route order
  // afterwards, so the arrival order never changes a result.
  virtual int next_ready(device::ExpertView* out) = 0;
  // The pass over `layer` is done with the views it was given.
  virtual void release(int layer) = 0;

  // The rows of the pass whose begin() calls follow (a decode step: 1; a verify pass: a few; a
  // prefill slice: hundreds). Returns whether next_ready() may hand out views marked
  // compute_on_host in it: a GPU host's tier computes its planned share of experts on the host's
  // cores only in passes of a few rows (DeviceTier::kHostPassRows). Others ignore it.
  virtual bool pass_rows(int64_t /*rows*/) { return false; }
  // A hint: these experts of `layer` will probably be requested soon, most likely first; the model
  // predicted them `distance` layers before `layer` (1: from the layer just before it). Never
  // changes what next_ready() returns.
  virtual void prefetch(int /*layer*/, std::span<const int32_t> /*experts*/, int /*distance*/) {}
  // Expert `expert` of `layer`'s host view if its bytes are in host memory now (no read in flight),
  // pinned there until unpin(): a device tier copies predicted experts ahead from it. Never reads,
  // never counts as a request, never opens a lease (it may be called while one is open). Providers
  // without such a copy say false.
  virtual bool pin_resident(int /*layer*/, int /*expert*/, device::ExpertView* /*out*/) { return false; }
  virtual void unpin(int /*layer*/, int /*expert*/) {}
  // How many layers ahead the model should predict now: 0 (no prefetch: the model computes no
  // predictions), 1 (the next layer), or more (while the drives would otherwise idle).
  virtual int lookahead() const { return 0; }
  // The most experts one begin() may name (a RAM budget); the model splits a pass's union
  // into groups of this size, so each expert is still read once per pass.
  virtual size_t max_batch() const { return SIZE_MAX; }

  // Running totals for planning (the draft controller predicts what a wider verify pass costs in
  // reads from them): experts asked for, experts that had to be read (demand misses), bytes read
  // (demand and prefetch), bytes per expert record and the drives' current read bandwidth
  // (bytes/s summed over homes; 0 = unknown). Resident providers read nothing.
  struct ReadTotals {
    uint64_t requests = 0, misses = 0, bytes_read = 0;
    uint64_t expert_bytes = 0;
    double bytes_per_second = 0;
  };
  virtual ReadTotals read_totals() const { return {}; }
};

}  // namespace sluice::store
