// io_uring O_DIRECT record reads with a per-home in-flight limit, shuffled record order, latency
// per read; files opened once each.
#include "bench/raw_read.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <unordered_map>

#include "core/arena.h"
#include "core/error.h"

#ifdef SLUICE_HAVE_URING
#include <liburing.h>
#endif

namespace sluice::bench {

namespace fs = std::filesystem;

std::vector<std::vector<RecordRef>> manifest_records(const store::Manifest& m) {
  std::vector<std::vector<RecordRef>> out(m.homes.size());
  for (const auto& layer : m.holders)
    for (const auto& holders : layer)
      for (const auto& h : holders)
        if (h.local)  // a streamed install's expert not fetched yet has no bytes to read
          out[size_t(h.home)].push_back({m.homes[size_t(h.home)].path + "/" + h.file, h.offset, h.length});
  return out;
}

std::vector<RecordRef> home_file_records(const std::string& home, uint64_t record_bytes) {
  if (record_bytes == 0 || record_bytes % 4096) fail("record size ", record_bytes, " is not a positive multiple of 4096");
  std::vector<RecordRef> out;
  std::error_code ec;
  if (!fs::is_directory(home, ec)) fail("--home ", home, ": not a directory");
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(home, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string name = it->path().filename().string();
    if (name.starts_with("sluice-") && name.ends_with(".json")) continue;
    files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    uint64_t size = fs::file_size(p, ec);
    if (ec) continue;
    for (uint64_t off = 0; off + record_bytes <= size; off += record_bytes) out.push_back({p.string(), off, record_bytes});
  }
  return out;
}

#ifdef SLUICE_HAVE_URING

RawReadResult raw_random_reads(const std::vector<std::vector<RecordRef>>& homes, const RawReadOptions& opt) {
  if (opt.queue_depth < 1) fail("queue depth must be at least 1");
  RawReadResult res;
  res.queue_depth = opt.queue_depth;
  const size_t nh = homes.size();
  res.home_bytes.assign(nh, 0);
  res.home_reads.assign(nh, 0);
  res.home_bytes_per_s.assign(nh, 0);
  uint64_t max_len = 0;
  std::vector<std::vector<size_t>> order(nh);
  std::mt19937_64 rng(opt.seed);
  for (size_t h = 0; h < nh; ++h) {
    if (homes[h].empty()) fail("no records to read on home ", h);
    order[h].resize(homes[h].size());
    for (size_t i = 0; i < order[h].size(); ++i) order[h][i] = i;
    std::shuffle(order[h].begin(), order[h].end(), rng);
    for (const auto& r : homes[h]) max_len = std::max(max_len, r.length);
  }
  const uint64_t buf_len = (max_len + 4095) / 4096 * 4096;
  const size_t slots = nh * size_t(opt.queue_depth);
  auto buffers = allocate_touched(buf_len * slots, 4096);

  std::unordered_map<std::string, int> fds;
  auto fd_of = [&](const std::string& path) {
    auto it = fds.find(path);
    if (it != fds.end()) return it->second;
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) fail(path, ": cannot open with O_DIRECT: ", std::strerror(errno));
    fds[path] = fd;
    return fd;
  };
  struct CloseAll {
    std::unordered_map<std::string, int>& fds;
    ~CloseAll() {
      for (auto& [p, fd] : fds) ::close(fd);
    }
  } closer{fds};

  io_uring ring{};
  unsigned entries = 1;
  while (entries < slots) entries <<= 1;
  int rc = io_uring_queue_init(entries, &ring, 0);
  if (rc < 0) fail("io_uring_queue_init failed: ", std::strerror(-rc));
  struct RingExit {
    io_uring* r;
    ~RingExit() { io_uring_queue_exit(r); }
  } ring_exit{&ring};

  using clock = std::chrono::steady_clock;
  struct Slot {
    size_t home = 0;
    uint64_t length = 0;
    clock::time_point start;
  };
  std::vector<Slot> slot(slots);
  std::vector<size_t> next(nh, 0);
  std::vector<float> latency;
  uint64_t issued_bytes = 0;
  const auto t0 = clock::now();
  bool stopping = false;
  size_t inflight = 0;
  auto issue = [&](size_t s) {
    size_t h = slot[s].home;
    const RecordRef& r = homes[h][order[h][next[h]++ % order[h].size()]];
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (!sqe) fail("io_uring: submission queue full");
    uint64_t len = (r.length + 4095) / 4096 * 4096;
    io_uring_prep_read(sqe, fd_of(r.path), buffers.get() + s * buf_len, unsigned(len), r.offset);
    io_uring_sqe_set_data64(sqe, s);
    slot[s].length = len;
    slot[s].start = clock::now();
    issued_bytes += len;
    ++inflight;
  };
  for (size_t s = 0; s < slots; ++s) {
    slot[s].home = s / size_t(opt.queue_depth);
    issue(s);
  }
  io_uring_submit(&ring);
  while (inflight) {
    io_uring_cqe* cqe = nullptr;
    rc = io_uring_wait_cqe(&ring, &cqe);
    if (rc == -EINTR) continue;
    if (rc < 0) fail("io_uring_wait_cqe failed: ", std::strerror(-rc));
    size_t s = size_t(io_uring_cqe_get_data64(cqe));
    int got = cqe->res;
    io_uring_cqe_seen(&ring, cqe);
    --inflight;
    if (got < 0) fail("O_DIRECT read failed on home ", slot[s].home, ": ", std::strerror(-got));
    auto now = clock::now();
    latency.push_back(float(std::chrono::duration<double, std::milli>(now - slot[s].start).count()));
    res.home_bytes[slot[s].home] += uint64_t(got);
    res.home_reads[slot[s].home] += 1;
    double elapsed = std::chrono::duration<double>(now - t0).count();
    if (elapsed >= opt.seconds || (opt.max_bytes && issued_bytes >= opt.max_bytes)) stopping = true;
    if (!stopping) {
      issue(s);
      io_uring_submit(&ring);
    }
  }
  res.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  for (size_t h = 0; h < nh; ++h) {
    res.bytes += res.home_bytes[h];
    res.reads += res.home_reads[h];
    res.home_bytes_per_s[h] = double(res.home_bytes[h]) / res.seconds;
  }
  res.bytes_per_s = double(res.bytes) / res.seconds;
  if (!latency.empty()) {
    double sum = 0;
    for (float l : latency) sum += l;
    res.mean_ms = sum / double(latency.size());
    std::sort(latency.begin(), latency.end());
    res.p99_ms = latency[std::min(latency.size() - 1, size_t(double(latency.size()) * 0.99))];
  }
  return res;
}

#else

RawReadResult raw_random_reads(const std::vector<std::vector<RecordRef>>&, const RawReadOptions&) {
  fail("this sluice was built without liburing; `sluice bench` raw reads need io_uring (apt install liburing-dev)");
}

#endif

}  // namespace sluice::bench
