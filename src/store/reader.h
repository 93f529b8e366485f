// Reads expert records from their homes with O_DIRECT into caller-owned aligned buffers. A record
// is read whole, or, striped, as one read per part, all parts at once from their homes. Each read
// goes to the holder (of its part) with the lowest expected completion time (bytes queued on that
// home / its bandwidth, which starts at the measured value and follows observed reads); a holder
// that fails or returns bytes with a wrong checksum is skipped and the read retried on the next.
// Engines: io_uring (one submission thread, a queue-depth limit per home) or a pread thread pool.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "store/manifest.h"
#include "store/slot_pool.h"

namespace sluice::store {

struct HomeStats {
  uint64_t reads = 0, bytes = 0, errors = 0;
  // Latencies of completed reads: the mean over all of them, the p99 over the most recent
  // kLatencyWindow (a ring: a long-running server's stats stay bounded, as do their copies).
  static constexpr size_t kLatencyWindow = 4096;
  std::vector<float> latency_ms;  // ring of up to kLatencyWindow, oldest overwritten first
  size_t latency_next = 0;
  double latency_sum_ms = 0;
  double bandwidth = 0;           // current estimate, bytes/s
  double busy_seconds = 0;        // time with reads in flight (spans that ended)
  void add_latency(float ms);
  double mean_ms() const;
  double p99_ms() const;
};

struct ReadFailure : Error {
  ReadFailure(const std::string& what, size_t pos) : Error(what), position(pos) {}
  size_t position;
};

// The most reads in flight per home the reader accepts (drives saturate far below it; each pread
// engine slot is a thread).
inline constexpr int kMaxQueueDepth = 256;

struct ReaderOptions {
  bool verify = true;        // xxh3 of every record against the manifest
  std::string engine = "auto";  // auto | io_uring | pread
  int queue_depth = 4;       // reads in flight per home
  // Prefetch reads in flight per home at most (0: half the queue depth, at least 1), so that a
  // demand read always finds room on its home instead of queueing behind guesses.
  int prefetch_depth = 0;
};

class ExpertReader {
 public:
  // Throws Error (never terminates) when the options are bad or the engine cannot start.
  ExpertReader(const Manifest& m, const ReaderOptions& opt);
  ~ExpertReader();
  ExpertReader(const ExpertReader&) = delete;
  ExpertReader& operator=(const ExpertReader&) = delete;

  // Queues a read of (layer, expert) into dst (slot_bytes, 4 KiB aligned); returns a ticket.
  // Demand reads (urgent) queue ahead of every waiting prefetch read.
  uint64_t submit(int layer, int expert, std::byte* dst, bool urgent = true);
  // Drops a read that is still queued (no drive has any part of it yet): true, and the ticket is
  // forgotten; false when it is in flight or done (wait for it as usual).
  bool cancel(uint64_t ticket);
  // Makes a queued prefetch read a demand read (its expert was just asked for): its parts still
  // queued move ahead of every waiting prefetch. No effect once the read is done.
  void promote(uint64_t ticket);
  // Blocks until the ticket's read is done; throws naming the expert and homes if no holder
  // delivered a good copy.
  void wait(uint64_t ticket);
  // Blocks until one of `tickets` is done and returns its position in the list (that ticket is
  // then finished, as after wait). A failed read throws ReadFailure naming its position.
  size_t wait_any(std::span<const uint64_t> tickets);
  bool ready(uint64_t ticket);

  std::vector<HomeStats> stats() const;
  // Current read bandwidth of all healthy homes together (bytes/s), from the per-read estimates.
  double total_bandwidth() const;
  // Whether no read is queued or in flight on any home: the drives idle now.
  bool idle() const;
  // Seconds since the reader started during which no read was queued or in flight.
  double idle_seconds() const;
  // What the healthy homes deliver together while busy: the sum of each one's bytes read over the
  // time it had reads in flight (its measured rate from the manifest until 1 ms of that).
  // Unlike the per-read estimates behind the holder choice, throttled or bursty drives do not
  // inflate it.
  double busy_bandwidth() const;
  // How long a read of (layer, expert) would take on idle drives at those rates: each part from
  // its fastest usable holder, the slowest part (infinity if a part has none).
  double solo_seconds(int layer, int expert) const;
  const char* engine() const { return uring_ ? (registered_ ? "io_uring+fixed" : "io_uring") : "pread"; }
  // Registers [base, base+bytes) (the cache arena) with io_uring so reads into it use fixed
  // buffers (no per-read page pinning). Returns false when the kernel refuses (for example a low
  // RLIMIT_MEMLOCK); reads then use ordinary buffers. Call before the first submit.
  bool register_arena(std::byte* base, size_t bytes);
  // Test hook: every read from `home` first sleeps this long.
  void set_home_delay(int home, double seconds);

 private:
  // A record read (the ticket the caller holds) is one read per part of the record: a record held
  // whole is one part, a striped record one per stripe, each part read from its own holder (and
  // retried on another copy of that part).
  struct Record {
    int layer, expert;
    std::byte* dst;
    bool urgent = true;      // a demand read (its parts ahead of prefetches in the queue)
    int parts_left = 0;      // parts neither done nor failed
    int state = 0;           // 0 reading, 2 done, 3 failed
    std::string error;
    std::vector<uint64_t> parts;
  };
  struct Job {               // one part's read
    uint64_t record;         // its ticket
    Part part;
    std::vector<int> tried;  // holder indices already attempted
    int holder = -1;         // current attempt
    int state = 0;           // 0 queued, 1 in flight, 2 done, 3 failed
    bool as_prefetch = false;  // counted among its home's prefetch reads while in flight
    double started = 0;        // when the current attempt went to its drive (now_s)
    std::string error;
  };
  // Under mu_: the holder (index into the record's holders) for j's next attempt; -2 when every
  // candidate's home is full, -1 when none is left.
  int pick_holder(Job& j);
  // Under mu_: puts a queued part in line (a demand read after the waiting demand reads, before
  // any prefetch; a prefetch last) and wakes the readers.
  void enqueue(uint64_t id, bool urgent);
  // Under mu_: counts an attempt of j on holder h in (+1) or out (-1) of its home's queue.
  void charge(Job& j, const Holder& h, int sign);
  // Under mu_: the part's read ended (ok, or failed for `why`); retries it on another holder or
  // settles it, and its record once every part is settled.
  void finish_attempt(uint64_t id, bool ok, const std::string& why, double seconds);
  // Under mu_: after parts were added or removed, starts or ends an idle span (no part queued or
  // in flight).
  void note_activity();
  // Under mu_: home h's bytes per second while it had reads in flight (see busy_bandwidth).
  double busy_rate(size_t h) const;
  // Under mu_: no holder is left for the queued part `id` (already out of the queue).
  void give_up(uint64_t id);
  const Holder& holder_of(const Job& j);  // under mu_
  Record& record(uint64_t ticket);  // under mu_; throws for an unknown ticket
  Job& job(uint64_t id);            // under mu_; throws for an unknown part read
  // Under mu_: forgets the settled record `ticket` (r); if it failed, throws its error
  // (ReadFailure at `position` when with_position).
  void finish_record(uint64_t ticket, const Record& r, size_t position, bool with_position);
  int open_file(int home, const std::string& file, std::string& why);  // under mu_; -1 and why on failure
  // Whether a part read from h (at `part`) has h's checksum (always, with verification off).
  bool verified(const std::byte* part, const Holder& h) const;
  void stop_threads();  // asks every thread to stop and joins it
  void pread_worker();
  void uring_loop();

  const Manifest& m_;
  ReaderOptions opt_;
  mutable std::mutex mu_;
  std::condition_variable cv_job_, cv_done_;
  // Records by ticket and part reads by id, in slots reused from read to read: a miss allocates
  // nothing once as many reads have been in flight at once before.
  SlotPool<Record> records_;
  SlotPool<Job> jobs_;
  std::deque<uint64_t> queue_;  // part ids
  std::vector<Part> parts_scratch_;  // submit's parts of the record (under mu_)
  std::string path_scratch_;         // open_file's lookup key (under mu_)
  bool stop_ = false;
  // Idle spans (no part queued or in flight, i.e. jobs_ empty; note_activity keeps idle_ so):
  // their total so far, and the current one's start.
  bool idle_ = true;
  double idle_total_ = 0;
  std::chrono::steady_clock::time_point idle_since_ = std::chrono::steady_clock::now();
  std::vector<HomeStats> stats_;
  std::vector<uint64_t> inflight_bytes_;
  std::vector<int> inflight_;
  std::vector<int> prefetch_inflight_;  // the prefetch reads among them
  // Per home: when its current span of reads in flight began (HomeStats::busy_seconds: the ended ones).
  std::vector<std::chrono::steady_clock::time_point> busy_since_;
  int prefetch_depth_ = 1;
  std::vector<double> delay_;
  std::vector<bool> healthy_;
  std::unordered_map<std::string, int> fds_;
  std::vector<std::thread> threads_;
  struct Uring;
  std::unique_ptr<Uring> uring_;
  bool registered_ = false;
  std::byte* arena_ = nullptr;
  size_t arena_chunk_ = 0, arena_bytes_ = 0;
};

}  // namespace sluice::store
