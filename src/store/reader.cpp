// Expert reader: holder choice by expected completion time, retries on other holders, O_DIRECT
// reads through io_uring or a pread thread pool, xxh3 verification, per-home statistics.
#include "store/reader.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
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
  uint64_t t = next_ticket_++;
  Job j;
  j.layer = layer;
  j.expert = expert;
  j.dst = dst;
  j.urgent = urgent;
  jobs_.emplace(t, std::move(j));
  enqueue(t, urgent);
  return t;
}

void ExpertReader::enqueue(uint64_t ticket, bool urgent) {
  auto at = queue_.end();
  if (urgent)  // after the demand reads already waiting, before any prefetch
    at = std::find_if(queue_.begin(), queue_.end(), [&](uint64_t id) { return !jobs_.at(id).urgent; });
  queue_.insert(at, ticket);
  cv_job_.notify_all();
}

void ExpertReader::charge(const Job& j, const Holder& h, int sign) {
  inflight_[size_t(h.home)] += sign;
  prefetch_inflight_[size_t(h.home)] += j.urgent ? 0 : sign;
  if (sign > 0) inflight_bytes_[size_t(h.home)] += h.length;
  else inflight_bytes_[size_t(h.home)] -= h.length;
}

bool ExpertReader::cancel(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(ticket);
  if (it == jobs_.end() || it->second.state != 0) return false;
  auto q = std::find(queue_.begin(), queue_.end(), ticket);
  if (q == queue_.end()) return false;  // between attempts (a retry): let it finish
  queue_.erase(q);
  jobs_.erase(it);
  return true;
}

void ExpertReader::promote(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(ticket);
  if (it == jobs_.end() || it->second.state != 0 || it->second.urgent) return;
  auto q = std::find(queue_.begin(), queue_.end(), ticket);
  if (q == queue_.end()) return;
  queue_.erase(q);
  it->second.urgent = true;
  enqueue(ticket, true);
}

bool ExpertReader::ready(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(ticket);
  return it == jobs_.end() || it->second.state >= 2;
}

void ExpertReader::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = jobs_.find(ticket);
  if (it == jobs_.end()) fail("expert read ticket ", ticket, " is unknown");
  cv_done_.wait(lock, [&] { return it->second.state >= 2; });
  Job j = std::move(it->second);
  jobs_.erase(it);
  if (j.state == 3) throw Error(j.error);
}

size_t ExpertReader::wait_any(std::span<const uint64_t> tickets) {
  std::unique_lock<std::mutex> lock(mu_);
  for (uint64_t t : tickets)
    if (!jobs_.count(t)) fail("expert read ticket ", t, " is unknown");
  size_t pos = 0;
  cv_done_.wait(lock, [&] {
    for (size_t i = 0; i < tickets.size(); ++i)
      if (jobs_.at(tickets[i]).state >= 2) {
        pos = i;
        return true;
      }
    return false;
  });
  auto it = jobs_.find(tickets[pos]);
  Job j = std::move(it->second);
  jobs_.erase(it);
  if (j.state == 3) throw ReadFailure(j.error, pos);
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

int ExpertReader::pick_holder(Job& j) {
  const auto& holders = m_.of(j.layer, j.expert);
  int best = -1;
  double best_eta = 0;
  bool busy = false;
  for (int i = 0; i < int(holders.size()); ++i) {
    if (std::find(j.tried.begin(), j.tried.end(), i) != j.tried.end()) continue;
    int h = holders[size_t(i)].home;
    if (!healthy_[size_t(h)] || !holders[size_t(i)].local) continue;  // not fetched yet: nothing to read
    const int depth = j.urgent ? opt_.queue_depth : prefetch_depth_;
    if (inflight_[size_t(h)] >= opt_.queue_depth || prefetch_inflight_[size_t(h)] >= depth) {
      busy = true;
      continue;
    }
    double eta = double(inflight_bytes_[size_t(h)] + holders[size_t(i)].length) / stats_[size_t(h)].bandwidth;
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
  std::string path = dir + "/" + file;
  auto it = fds_.find(path);
  if (it != fds_.end()) return it->second;
  // No symlinks below the home and regular files only: a FIFO would block a reader thread forever.
  int fd = open_home_file(dir, file, O_RDONLY | O_DIRECT, why);
  if (fd >= 0) fds_[path] = fd;
  return fd;
}

bool ExpertReader::check(const Job& j, const Holder& h) const {
  return !opt_.verify || XXH3_64bits(j.dst, h.length) == h.xxh3;
}

void ExpertReader::finish_attempt(uint64_t id, Job& j, bool ok, const std::string& why, double seconds) {
  const Holder& h = m_.of(j.layer, j.expert)[size_t(j.holder)];
  HomeStats& s = stats_[size_t(h.home)];
  charge(j, h, -1);
  if (ok) {
    s.reads += 1;
    s.bytes += h.length;
    s.add_latency(float(seconds * 1e3));
    if (seconds > 0) s.bandwidth = 0.8 * s.bandwidth + 0.2 * (double(h.length) / seconds);
    j.state = 2;
  } else {
    s.errors += 1;
    j.tried.push_back(j.holder);
    j.error += cat(j.error.empty() ? "" : "; ", m_.homes[size_t(h.home)].path, "/", h.file, ": ", why);
    j.state = 0;
    if (pick_holder(j) == -1) {
      j.state = 3;
      j.error = cat("expert ", j.expert, " of layer ", j.layer, ": no holder delivered a good copy (", j.error, ")");
    } else {
      queue_.push_front(id);
    }
  }
  if (j.state >= 2) cv_done_.notify_all();
  cv_job_.notify_all();
}

void ExpertReader::pread_worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    uint64_t id = 0;
    int holder = -1;
    cv_job_.wait(lock, [&] {
      if (stop_) return true;
      for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        Job& j = jobs_.at(*it);
        holder = pick_holder(j);
        if (holder == -1) {  // nothing left to try
          j.state = 3;
          j.error = cat("expert ", j.expert, " of layer ", j.layer, ": no usable holder (homes missing or failing)",
                        j.error.empty() ? "" : " (" + j.error + ")");
          queue_.erase(it);
          cv_done_.notify_all();
          return false;
        }
        if (holder >= 0) {
          id = *it;
          queue_.erase(it);
          return true;
        }
      }
      return false;
    });
    if (stop_) return;
    Job& j = jobs_.at(id);
    j.holder = holder;
    j.state = 1;
    const Holder h = m_.of(j.layer, j.expert)[size_t(holder)];
    charge(j, h, +1);
    std::string why;
    int fd = open_file(h.home, h.file, why);
    double delay = delay_[size_t(h.home)];
    std::byte* dst = j.dst;
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
        Job probe{j.layer, j.expert, dst, {}, holder, 0, 1, {}};
        ok = check(probe, h);
        if (!ok) why = "checksum mismatch";
      }
    }
    double dt = now_s() - t0;
    lock.lock();
    finish_attempt(id, jobs_.at(id), ok, why, dt);
  }
}

void ExpertReader::uring_loop() {
#ifdef SLUICE_HAVE_URING
  io_uring* ring = &uring_->ring;
  std::unordered_map<uint64_t, double> started;
  int inflight = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (inflight == 0) cv_job_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_ && inflight == 0) return;
      // Dispatch every queued job whose holders have queue room.
      for (auto it = queue_.begin(); it != queue_.end();) {
        Job& j = jobs_.at(*it);
        int holder = pick_holder(j);
        if (holder == -2) {
          ++it;
          continue;
        }
        if (holder == -1) {
          j.state = 3;
          j.error = cat("expert ", j.expert, " of layer ", j.layer, ": no usable holder (homes missing or failing)",
                        j.error.empty() ? "" : " (" + j.error + ")");
          it = queue_.erase(it);
          cv_done_.notify_all();
          continue;
        }
        const Holder& h = m_.of(j.layer, j.expert)[size_t(holder)];
        std::string why;
        int fd = open_file(h.home, h.file, why);
        j.holder = holder;
        charge(j, h, +1);
        uint64_t id = *it;
        it = queue_.erase(it);
        if (fd < 0) {
          finish_attempt(id, j, false, cat("cannot open: ", why), 0);
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
        size_t at = size_t(j.dst - arena_);
        bool fixed = registered_ && j.dst >= arena_ && at + h.length <= arena_bytes_ &&
                     at / arena_chunk_ == (at + h.length - 1) / arena_chunk_;
        if (fixed)
          io_uring_prep_read_fixed(sqe, fd, j.dst, unsigned(h.length), h.offset, int(at / arena_chunk_));
        else
          io_uring_prep_read(sqe, fd, j.dst, unsigned(h.length), h.offset);
        io_uring_sqe_set_data64(sqe, id);
        started[id] = now_s();
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
    std::vector<std::pair<uint64_t, int>> done;
    io_uring_for_each_cqe(ring, head, cqe) {
      done.push_back({io_uring_cqe_get_data64(cqe), cqe->res});
      ++seen;
    }
    io_uring_cq_advance(ring, seen);
    for (auto [id, res] : done) {
      --inflight;
      double t1 = now_s();
      std::unique_lock<std::mutex> lock(mu_);
      Job& j = jobs_.at(id);
      const Holder h = m_.of(j.layer, j.expert)[size_t(j.holder)];
      lock.unlock();
      bool ok = res == int(h.length);
      std::string why = res < 0 ? cat("read failed: ", std::strerror(-res)) : (ok ? "" : "short read");
      if (ok) {
        ok = check(j, h);
        if (!ok) why = "checksum mismatch";
      }
      lock.lock();
      finish_attempt(id, j, ok, why, t1 - started[id]);
      started.erase(id);
    }
  }
#endif
}

}  // namespace sluice::store
