// The streaming ExpertProvider, the RAM cache of the store: routed experts live on drives (homes)
// and pass through one RAM arena of fixed-size slots with a byte budget, allocated and touched at
// load. Misses of a request are read together (read-once per pass: the model asks for a pass's
// union once); eviction prefers experts that are neither recent nor hot (decayed usage counts that
// persist across runs). It composes the store's other units: the reader (store/reader.h) reads
// records from the homes, the prefetch policy (store/prefetch_policy.h) decides which guesses at
// coming layers are read ahead, and remote fill (store/remote_fill.h) fetches the experts of a
// streamed install that are not local yet. A device tier (store/device_tier.h) sits in front of it
// as one more provider.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "store/expert_provider.h"
#include "store/expert_source.h"
#include "store/heat.h"
#include "store/manifest.h"
#include "store/prefetch_policy.h"
#include "store/reader.h"

namespace sluice::store {

// The machine's physical memory (sysconf), or 0 when unknown.
uint64_t physical_memory_bytes();

struct StreamOptions {
  // Budget of the slot arena; a budget above physical memory is refused, and the arena never has
  // more slots than the bank has experts.
  uint64_t cache_bytes = 1ull << 30;
  ReaderOptions reader;
  bool prefetch = true;
  // Read ahead only the predictions whose confidence rank (in their layer) was right at least this
  // often lately (an EWMA that starts at 0: a rank earns it). 0 reads every prediction.
  double prefetch_min_precision = 0.95;
  // Also read next-layer predictions that have not earned prefetch_min_precision when they are
  // handed over while no read is queued or in flight, as many as the drive time a layer leaves
  // unused can read (DriveSpare): where the drives idle (small records, compute a large share of
  // a token) such guesses cost no drive time a demand read wanted; where they are the bottleneck
  // nothing is left and none is read.
  bool prefetch_when_idle = false;
  // How many layers ahead the model predicts and these read: 1 (the next layer) to
  // kMaxPrefetchLayers. Guesses at the layers after the next are made, and read, only while no
  // read is queued or in flight (drive time nothing else wants); each distance earns its own
  // precision per rank.
  int prefetch_layers = 1;
  std::string heat_file;  // loaded at start, saved by save_heat(); empty = none
  // Fetches experts whose holders are not local yet (streamed installs); null = all must be local.
  std::shared_ptr<ExpertSource> source;
};

struct StoreCounters {
  uint64_t requests = 0, hits = 0, misses = 0;  // experts asked for, found in RAM, read on demand
  uint64_t prefetch_issued = 0, prefetch_used = 0, prefetch_suppressed = 0;
  // Prefetch reads dropped while still queued (their layer's real route did not want them; they
  // cost no bytes), and prefetched experts evicted without ever being asked for (bytes read for
  // nothing: prefetch_wasted × the record size).
  uint64_t prefetch_cancelled = 0, prefetch_wasted = 0;
  // Prefetch reads of guesses two or more layers ahead (among prefetch_issued), and how many of
  // those experts were asked for.
  uint64_t prefetch_further = 0, prefetch_further_used = 0;
  // Next-layer guesses read on idle drives without having earned the precision gate
  // (--prefetch-idle; among prefetch_issued).
  uint64_t prefetch_idle = 0;
  uint64_t predicted_total = 0, predicted_correct = 0, actual_total = 0;  // next-layer recall
  uint64_t bytes_read = 0;
  uint64_t fetched = 0;  // experts fetched from the source on first use (streamed installs)
  std::vector<uint64_t> reads_by_layer;  // demand + prefetch reads per layer
};

class StreamingExperts : public ExpertProvider {
 public:
  StreamingExperts(Manifest manifest, const StreamOptions& opt);
  ~StreamingExperts() override;

  void begin(int layer, std::span<const int32_t> experts) override;
  int next_ready(device::ExpertView* out) override;
  void release(int layer) override;
  void prefetch(int layer, std::span<const int32_t> experts, int distance) override;
  bool pin_resident(int layer, int expert, device::ExpertView* out) override;
  void unpin(int layer, int expert) override;
  int lookahead() const override;
  size_t max_batch() const override { return max_batch_; }

  const StoreCounters& counters() const { return counters_; }
  ReadTotals read_totals() const override;
  std::vector<HomeStats> home_stats() const { return reader_->stats(); }
  double drives_idle_seconds() const { return reader_->idle_seconds(); }
  const Manifest& manifest() const { return m_; }
  uint64_t missing() const;  // experts with no local copy yet (fetched on first use)
  size_t slots() const { return slots_.size(); }
  // The RAM arena every view points into (a device may register it for its copy engine).
  std::byte* arena_data() { return arena_.get(); }
  size_t arena_bytes() const { return slots_.size() * size_t(m_.layout.slot_bytes); }
  const char* reader_engine() const { return reader_->engine(); }
  void set_home_delay(int home, double seconds) { reader_->set_home_delay(home, seconds); }
  void save_heat() const;

 private:
  struct Slot {
    int layer = -1, expert = -1;
    int pins = 0;
    uint64_t ticket = 0;     // read in flight (0 = none)
    bool prefetched = false;  // filled by prefetch and not yet claimed
    bool unused = false;      // read by prefetch and never asked for since (wasted if evicted so)
    bool further = false;     // prefetched from two or more layers ahead
    uint64_t last_use = 0;
  };
  int find(int layer, int expert) const;
  int victim();  // a slot that may be reused now, or -1
  void reap();   // collects finished reads of unpinned slots
  void assign(int slot, int layer, int expert);
  // Drops a prefetch read that no drive has started: the slot is empty again. False if the read
  // is in flight or done (it lands and the slot stays a cache entry).
  bool cancel_prefetch(Slot& s);
  // Fetches experts[which[..]] (not local) from the source into their slots and marks them local.
  void fetch_missing(int layer, std::span<const int32_t> experts, const std::vector<int>& slot_of,
                     const std::vector<size_t>& which);
  std::byte* data(int slot) { return arena_.get() + size_t(slot) * m_.layout.slot_bytes; }

  Manifest m_;
  StreamOptions opt_;
  std::unique_ptr<ExpertReader> reader_;
  std::unique_ptr<std::byte[], AlignedFree> arena_;
  std::vector<Slot> slots_;
  std::vector<int> where_;        // (layer, expert) -> slot or -1
  std::vector<int> pinned_now_;   // slots of the current request, in its order (pinned)
  std::vector<bool> handed_;      // which of them next_ready returned
  // Tables of one request, kept so that a request whose experts are all in RAM allocates nothing.
  std::vector<int> slot_of_;
  std::vector<size_t> to_fetch_, ticket_index_;
  std::vector<uint64_t> tickets_;
  size_t handed_count_ = 0;
  PrefetchPolicy policy_;
  size_t max_batch_ = 1;
  uint64_t tick_ = 0;
  Heat heat_;
  StoreCounters counters_;
};

}  // namespace sluice::store
