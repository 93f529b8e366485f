// Expert reader: holder choice by expected completion time, retries on other holders, O_DIRECT
// reads through io_uring or a pread thread pool, xxh3 verification, per-home statistics.
#include "store/reader.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <system_error>

#include "core/error.h"
#include "store/home_file.h"

#ifdef SLUICE_HAVE_URING
#include <liburing.h>
#endif

namespace sluice::store {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void HomeStats::add_latency(float ms) {
  latency_sum_ms += ms;
  if (latency_ms.size() < kLatencyWindow) {
    latency_ms.push_back(ms);
  } else {
    latency_ms[latency_next] = ms;
    latency_next = (latency_next + 1) % kLatencyWindow;
  }
}

double HomeStats::mean_ms() const { return reads ? latency_sum_ms / double(reads) : 0; }

double HomeStats::p99_ms() const {
  if (latency_ms.empty()) return 0;
  std::vector<float> v = latency_ms;
  size_t k = std::min(v.size() - 1, size_t(double(v.size()) * 0.99));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return v[k];
}

#ifdef SLUICE_HAVE_URING
struct ExpertReader::Uring {
  io_uring ring{};
  bool live = false;  // set once io_uring_queue_init succeeded
  ~Uring() {
    if (live) io_uring_queue_exit(&ring);
  }
};
#else
struct ExpertReader::Uring {};
#endif

ExpertReader::ExpertReader(const Manifest& m, const ReaderOptions& opt) : m_(m), opt_(opt) {
  // Everything that can fail is checked before the first thread starts, and a thread that cannot
  // be started stops the ones already running: a constructor that throws with joinable threads
  // would end the process in std::terminate instead of reporting the error.
  if (opt_.queue_depth < 1 || opt_.queue_depth > kMaxQueueDepth)
    fail("reader queue depth ", opt_.queue_depth, " is outside 1..", kMaxQueueDepth);
  if (opt_.engine != "auto" && opt_.engine != "io_uring" && opt_.engine != "pread")
    fail("reader engine '", opt_.engine, "' is not auto, io_uring or pread");
  const size_t H = m.homes.size();
  stats_.resize(H);
  inflight_bytes_.assign(H, 0);
  inflight_.assign(H, 0);
  prefetch_inflight_.assign(H, 0);
  busy_since_.resize(H);
  if (opt_.prefetch_depth < 0 || opt_.prefetch_depth > opt_.queue_depth)
    fail("reader prefetch depth ", opt_.prefetch_depth, " is outside 0..", opt_.queue_depth, " (the queue depth)");
  prefetch_depth_ = opt_.prefetch_depth > 0 ? opt_.prefetch_depth : std::max(1, opt_.queue_depth / 2);
  delay_.assign(H, 0.0);
  healthy_.assign(H, true);
  for (size_t h = 0; h < H; ++h) {
    double bw = m.homes[h].read_bytes_per_s > 0 ? m.homes[h].read_bytes_per_s : 1e9;
    stats_[h].bandwidth = bw / opt_.queue_depth;  // per-read share
  }
  bool want_uring = opt_.engine == "io_uring" || opt_.engine == "auto";
#ifdef SLUICE_HAVE_URING
  if (want_uring) {
    auto u = std::make_unique<Uring>();
    unsigned entries = unsigned(std::max<size_t>(8, H * size_t(opt_.queue_depth) * 2));
    int rc = io_uring_queue_init(entries, &u->ring, 0);
    if (rc == 0) {
      u->live = true;
      uring_ = std::move(u);
    } else if (opt_.engine == "io_uring") {
      fail("io_uring is not available here (io_uring_queue_init with ", entries, " entries: ", std::strerror(-rc),
           "); use --reader pread");
    }
  }
#else
  if (opt_.engine == "io_uring") fail("this sluice was built without liburing; use --reader pread");
  (void)want_uring;
#endif
  const size_t threads = uring_ ? 1 : H * size_t(opt_.queue_depth);
  try {
    for (size_t i = 0; i < threads; ++i) {
      if (uring_) threads_.emplace_back([this] { uring_loop(); });
      else threads_.emplace_back([this] { pread_worker(); });
    }
  } catch (const std::system_error& e) {
    stop_threads();
    fail("cannot start ", threads, " expert reader threads (", e.what(), "); lower --queue-depth");
  }
}

void ExpertReader::stop_threads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_job_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

ExpertReader::~ExpertReader() {
  stop_threads();
  for (auto& [path, fd] : fds_) ::close(fd);
}

bool ExpertReader::register_arena(std::byte* base, size_t bytes) {
#ifdef SLUICE_HAVE_URING
  if (!uring_ || bytes == 0) return false;
  // One iovec per 1 GiB (the kernel's limit per registered buffer).
  const size_t chunk = size_t(1) << 30;
  std::vector<iovec> iov;
  for (size_t off = 0; off < bytes; off += chunk) iov.push_back({base + off, std::min(chunk, bytes - off)});
  if (io_uring_register_buffers(&uring_->ring, iov.data(), unsigned(iov.size())) != 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  registered_ = true;
  arena_ = base;
  arena_chunk_ = chunk;
  arena_bytes_ = bytes;
  return true;
#else
  (void)base;
  (void)bytes;
  return false;
#endif
}

void ExpertReader::set_home_delay(int home, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  delay_.at(size_t(home)) = seconds;
}

uint64_t ExpertReader::submit(int layer, int expert, std::byte* dst, bool urgent) {
  std::lock_guard<std::mutex> lock(mu_);
  parts_of(m_.of(layer, expert), parts_scratch_);
  if (parts_scratch_.empty()) fail("expert ", expert, " of layer ", layer, " has no holder in the manifest");
  uint64_t t;
  Record& r = records_.take(t);
  r.layer = layer;
  r.expert = expert;
  r.dst = dst;
  r.urgent = urgent;
  r.parts_left = int(parts_scratch_.size());
  r.state = 0;
  r.error.clear();
  r.parts.clear();
  for (const Part& p : parts_scratch_) {
    uint64_t id;
    Job& j = jobs_.take(id);
    j.record = t;
    j.part = p;
    j.tried.clear();
    j.holder = -1;
    j.state = 0;
    j.as_prefetch = false;
    j.started = 0;
    j.error.clear();
    r.parts.push_back(id);
    enqueue(id, urgent);
  }
  note_activity();
  return t;
}

ExpertReader::Record& ExpertReader::record(uint64_t ticket) {
  Record* r = records_.find(ticket);
  if (!r) fail("expert read ticket ", ticket, " is unknown");
  return *r;
}

ExpertReader::Job& ExpertReader::job(uint64_t id) {
  Job* j = jobs_.find(id);
  if (!j) fail("expert part read ", id, " is unknown");
  return *j;
}

void ExpertReader::note_activity() {
  const bool idle_now = jobs_.empty();
  if (idle_now == idle_) return;
  const auto now = std::chrono::steady_clock::now();
  if (idle_) idle_total_ += std::chrono::duration<double>(now - idle_since_).count();
  else idle_since_ = now;
  idle_ = idle_now;
}

double ExpertReader::busy_rate(size_t h) const {
  const HomeStats& s = stats_[h];
  if (s.busy_seconds < 1e-3 || s.bytes == 0) {
    const double measured = m_.homes[h].read_bytes_per_s;
    return measured > 0 ? measured : s.bandwidth * opt_.queue_depth;
  }
  return double(s.bytes) / s.busy_seconds;
}

double ExpertReader::busy_bandwidth() const {
  std::lock_guard<std::mutex> lock(mu_);
  double bw = 0;
  for (size_t h = 0; h < stats_.size(); ++h)
    if (healthy_[h]) bw += busy_rate(h);
  return bw;
}

double ExpertReader::solo_seconds(int layer, int expert) const {
  const auto& holders = m_.of(layer, expert);
  std::lock_guard<std::mutex> lock(mu_);
  double slowest = 0;
  for (const Holder& part : holders) {  // each part once per copy of it: a few holders at most
    double best = std::numeric_limits<double>::infinity();
    for (const Holder& x : holders)
      if (x.at == part.at && x.local && healthy_[size_t(x.home)])
        best = std::min(best, double(x.length) / busy_rate(size_t(x.home)));
    slowest = std::max(slowest, best);
  }
  return holders.empty() ? std::numeric_limits<double>::infinity() : slowest;
}

double ExpertReader::idle_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!idle_) return idle_total_;
  return idle_total_ + std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_since_).count();
}

void ExpertReader::enqueue(uint64_t id, bool urgent) {
  auto at = queue_.end();
  if (urgent)  // after the demand reads already waiting, before any prefetch
    at = std::find_if(queue_.begin(), queue_.end(),
                      [&](uint64_t q) { return !record(job(q).record).urgent; });
  queue_.insert(at, id);
  cv_job_.notify_all();
}

const Holder& ExpertReader::holder_of(const Job& j) {
  const Record& r = record(j.record);
  return m_.of(r.layer, r.expert)[size_t(j.holder)];
}

void ExpertReader::charge(Job& j, const Holder& h, int sign) {
  // A part counts as a prefetch while in flight if it was one when it started (a promotion
  // meanwhile moves only the parts still queued).
  if (sign > 0) j.as_prefetch = !record(j.record).urgent;
  const size_t home = size_t(h.home);
  if (sign > 0 && inflight_[home] == 0) busy_since_[home] = std::chrono::steady_clock::now();
  if (sign < 0 && inflight_[home] == 1)
    stats_[home].busy_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - busy_since_[home]).count();
  inflight_[home] += sign;
  prefetch_inflight_[home] += j.as_prefetch ? sign : 0;
  if (sign > 0) inflight_bytes_[home] += h.length;
  else inflight_bytes_[home] -= h.length;
}

bool ExpertReader::cancel(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  Record* r = records_.find(ticket);
  if (!r || r->state != 0) return false;
  // Only a record none of whose parts has reached a drive: a part in flight writes into dst.
  for (uint64_t id : r->parts) {
    const Job* j = jobs_.find(id);
    if (!j || j->state != 0 || std::find(queue_.begin(), queue_.end(), id) == queue_.end())
      return false;  // done, in flight, or between attempts
  }
  for (uint64_t id : r->parts) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), id));
    jobs_.release(id);
  }
  records_.release(ticket);
  note_activity();
  return true;
}

void ExpertReader::promote(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  Record* r = records_.find(ticket);
  if (!r || r->state != 0 || r->urgent) return;
  r->urgent = true;
  for (uint64_t id : r->parts) {
    auto q = std::find(queue_.begin(), queue_.end(), id);
    if (q == queue_.end()) continue;  // on a drive already, or done
    queue_.erase(q);
    enqueue(id, true);
  }
}

bool ExpertReader::ready(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  const Record* r = records_.find(ticket);
  return !r || r->state >= 2;
}

void ExpertReader::finish_record(uint64_t ticket, const Record& r, size_t position, bool with_position) {
  if (r.state == 3) {
    std::string error = r.error;  // a failure is the only path that copies
    records_.release(ticket);
    if (with_position) throw ReadFailure(error, position);
    throw Error(error);
  }
  records_.release(ticket);
}

void ExpertReader::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  const Record& rec = record(ticket);  // a reference stays valid while the slot is taken
  cv_done_.wait(lock, [&] { return rec.state >= 2; });
  finish_record(ticket, rec, 0, false);
}

size_t ExpertReader::wait_any(std::span<const uint64_t> tickets) {
  std::unique_lock<std::mutex> lock(mu_);
  for (uint64_t t : tickets) record(t);  // each must be known
  size_t pos = 0;
  cv_done_.wait(lock, [&] {
    for (size_t i = 0; i < tickets.size(); ++i)
      if (record(tickets[i]).state >= 2) {
        pos = i;
        return true;
      }
    return false;
  });
  finish_record(tickets[pos], record(tickets[pos]), pos, true);
  return pos;
}

std::vector<HomeStats> ExpertReader::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

double ExpertReader::total_bandwidth() const {
  std::lock_guard<std::mutex> lock(mu_);
  double bw = 0;
  for (size_t h = 0; h < stats_.size(); ++h)
    if (healthy_[h]) bw += stats_[h].bandwidth * opt_.queue_depth;
  return bw;
}

bool ExpertReader::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_;  // every part is queued or in flight until it settles (a dispatch moves it under mu_)
}

int ExpertReader::pick_holder(Job& j) {
  const Record& r = record(j.record);
  const auto& holders = m_.of(r.layer, r.expert);
  int best = -1;
  double best_eta = 0;
  bool busy = false;
  for (int i = 0; i < int(holders.size()); ++i) {
    const Holder& x = holders[size_t(i)];
    if (x.at != j.part.at || std::find(j.tried.begin(), j.tried.end(), i) != j.tried.end()) continue;
    int h = x.home;
    if (!healthy_[size_t(h)] || !x.local) continue;  // not fetched yet: nothing to read
    const int depth = r.urgent ? opt_.queue_depth : prefetch_depth_;
    if (inflight_[size_t(h)] >= opt_.queue_depth || prefetch_inflight_[size_t(h)] >= depth) {
      busy = true;
      continue;
    }
    double eta = double(inflight_bytes_[size_t(h)] + x.length) / stats_[size_t(h)].bandwidth;
    if (best < 0 || eta < best_eta) {
      best = i;
      best_eta = eta;
    }
  }
  if (best >= 0) return best;
  return busy ? -2 : -1;
}

int ExpertReader::open_file(int home, const std::string& file, std::string& why) {
  const std::string& dir = m_.homes[size_t(home)].path;
  path_scratch_.assign(dir).append("/").append(file);  // the lookup key, in a buffer kept for it
  auto it = fds_.find(path_scratch_);
  if (it != fds_.end()) return it->second;
  // No symlinks below the home and regular files only: a FIFO would block a reader thread forever.
  int fd = open_home_file(dir, file, O_RDONLY | O_DIRECT, why);
  if (fd >= 0) fds_[path_scratch_] = fd;
  return fd;
}

bool ExpertReader::verified(const std::byte* part, const Holder& h) const {
  return !opt_.verify || XXH3_64bits(part, h.length) == h.xxh3;
}

namespace {
// "expert E of layer L" and, for a striped record, which part.
std::string part_name(int layer, int expert, const Part& p, size_t parts) {
  return parts == 1 ? cat("expert ", expert, " of layer ", layer)
                    : cat("expert ", expert, " of layer ", layer, " (bytes ", p.at, "..", p.at + p.length, ")");
}
}  // namespace

void ExpertReader::give_up(uint64_t id) {
  Job& j = job(id);
  Record& r = record(j.record);
  const std::string what = part_name(r.layer, r.expert, j.part, r.parts.size());
  r.error += cat(r.error.empty() ? "" : "; ", j.tried.empty() ? what + ": no usable holder (homes missing or failing)"
                                                               : what + ": no holder delivered a good copy",
                 j.error.empty() ? "" : " (" + j.error + ")");
  j.state = 3;
  jobs_.release(id);
  note_activity();
  // The record settles once no part of it can still write into its buffer.
  if (--r.parts_left == 0) {
    r.state = 3;
    cv_done_.notify_all();
  }
}

void ExpertReader::finish_attempt(uint64_t id, bool ok, const std::string& why, double seconds) {
  Job& j = job(id);
  const Holder& h = holder_of(j);
  HomeStats& s = stats_[size_t(h.home)];
  charge(j, h, -1);
  if (ok) {
    s.reads += 1;
    s.bytes += h.length;
    s.add_latency(float(seconds * 1e3));
    if (seconds > 0) s.bandwidth = 0.8 * s.bandwidth + 0.2 * (double(h.length) / seconds);
    Record& r = record(j.record);
    jobs_.release(id);
    note_activity();
    if (--r.parts_left == 0) {
      r.state = r.error.empty() ? 2 : 3;
      cv_done_.notify_all();
    }
  } else {
    s.errors += 1;
    j.tried.push_back(j.holder);
    j.error += cat(j.error.empty() ? "" : "; ", m_.homes[size_t(h.home)].path, "/", h.file, ": ", why);
    j.state = 0;
    if (pick_holder(j) == -1) give_up(id);
    else queue_.push_front(id);
  }
  cv_job_.notify_all();
}

void ExpertReader::pread_worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    uint64_t id = 0;
    int holder = -1;
    cv_job_.wait(lock, [&] {
      if (stop_) return true;
      for (auto it = queue_.begin(); it != queue_.end();) {
        holder = pick_holder(job(*it));
        if (holder == -1) {  // nothing left to try
          const uint64_t gone = *it;
          it = queue_.erase(it);
          give_up(gone);
          continue;
        }
        if (holder >= 0) {
          id = *it;
          queue_.erase(it);
          return true;
        }
        ++it;
      }
      return false;
    });
    if (stop_) return;
    Job& j = job(id);
    j.holder = holder;
    j.state = 1;
    const Holder& h = holder_of(j);  // the manifest's: valid with the lock released
    charge(j, h, +1);
    std::string why;
    int fd = open_file(h.home, h.file, why);
    double delay = delay_[size_t(h.home)];
    std::byte* dst = record(j.record).dst + h.at;
    lock.unlock();
    double t0 = now_s();
    bool ok = false;
    if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    if (fd < 0) {
      why = cat("cannot open: ", why);
    } else {
      size_t got = 0;
      while (got < h.length) {
        ssize_t r = ::pread(fd, dst + got, h.length - got, off_t(h.offset + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
          why = r < 0 ? cat("read failed: ", std::strerror(errno)) : std::string("file too short");
          break;
        }
        got += size_t(r);
      }
      if (got == h.length) {
        ok = verified(dst, h);
        if (!ok) why = "checksum mismatch";
      }
    }
    double dt = now_s() - t0;
    lock.lock();
    finish_attempt(id, ok, why, dt);
  }
}

void ExpertReader::uring_loop() {
#ifdef SLUICE_HAVE_URING
  io_uring* ring = &uring_->ring;
  int inflight = 0;
  std::vector<std::pair<uint64_t, int>> done;  // completions of one wait (kept: no allocation per read)
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (inflight == 0) cv_job_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_ && inflight == 0) return;
      // Dispatch every queued part whose holders have queue room.
      for (auto it = queue_.begin(); it != queue_.end();) {
        Job& j = job(*it);
        int holder = pick_holder(j);
        if (holder == -2) {
          ++it;
          continue;
        }
        const uint64_t id = *it;
        it = queue_.erase(it);
        if (holder == -1) {
          give_up(id);
          continue;
        }
        j.holder = holder;
        const Holder& h = holder_of(j);
        std::string why;
        int fd = open_file(h.home, h.file, why);
        charge(j, h, +1);
        if (fd < 0) {
          finish_attempt(id, false, cat("cannot open: ", why), 0);
          it = queue_.begin();
          continue;
        }
        io_uring_sqe* sqe = io_uring_get_sqe(ring);
        if (!sqe) {  // ring full: undo and retry after completions
          charge(j, h, -1);
          queue_.push_front(id);
          break;
        }
        j.state = 1;
        std::byte* dst = record(j.record).dst + h.at;
        size_t at = size_t(dst - arena_);
        bool fixed = registered_ && dst >= arena_ && at + h.length <= arena_bytes_ &&
                     at / arena_chunk_ == (at + h.length - 1) / arena_chunk_;
        if (fixed)
          io_uring_prep_read_fixed(sqe, fd, dst, unsigned(h.length), h.offset, int(at / arena_chunk_));
        else
          io_uring_prep_read(sqe, fd, dst, unsigned(h.length), h.offset);
        io_uring_sqe_set_data64(sqe, id);
        j.started = now_s();
        ++inflight;
      }
    }
    io_uring_submit(ring);
    if (inflight == 0) continue;
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{0, 2'000'000};
    int rc = io_uring_wait_cqe_timeout(ring, &cqe, &ts);
    if (rc == -ETIME || rc == -EINTR) continue;
    if (rc < 0) fail("io_uring wait failed: ", std::strerror(-rc));
    unsigned head;
    unsigned seen = 0;
    done.clear();
    io_uring_for_each_cqe(ring, head, cqe) {
      done.push_back({io_uring_cqe_get_data64(cqe), cqe->res});
      ++seen;
    }
    io_uring_cq_advance(ring, seen);
    for (auto [id, res] : done) {
      --inflight;
      double t1 = now_s();
      std::unique_lock<std::mutex> lock(mu_);
      const Job& j = job(id);
      const Holder& h = holder_of(j);  // the manifest's: valid with the lock released
      const std::byte* dst = record(j.record).dst + h.at;
      const double started = j.started;
      lock.unlock();
      bool ok = res == int(h.length);
      std::string why = res < 0 ? cat("read failed: ", std::strerror(-res)) : (ok ? "" : "short read");
      if (ok) {
        ok = verified(dst, h);
        if (!ok) why = "checksum mismatch";
      }
      lock.lock();
      finish_attempt(id, ok, why, t1 - started);
    }
  }
#endif
}

}  // namespace sluice::store
