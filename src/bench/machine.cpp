// Machine facts from /proc and /sys, and directory probes: statfs, the holding block device, an
// O_DIRECT open and aligned read, one io_uring read, and a short timed read rate.
#include "bench/machine.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "core/arena.h"
#include "core/error.h"
#include "device/device.h"

#ifdef SLUICE_HAVE_URING
#include <liburing.h>
#endif

namespace sluice::bench {
namespace {

namespace fs = std::filesystem;

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

std::string filesystem_name(int64_t magic) {
  switch (uint32_t(magic)) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794C7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x2FC12FC1: return "zfs";
    case 0xF2F52010: return "f2fs";
    case 0x65735546: return "fuse";
    case 0x01021997: return "9p";
    case 0x858458F6: return "ramfs";
    default: return cat("0x", std::hex, uint32_t(magic));
  }
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// O_DIRECT whole-record reads with pread, one at a time, in a shuffled order, for `seconds`.
double pread_rate(const std::vector<RecordRef>& records, double seconds, uint64_t* bytes) {
  uint64_t max_len = 0;
  for (const RecordRef& r : records) max_len = std::max(max_len, r.length);
  auto buf = allocate_touched((max_len + 4095) / 4096 * 4096, 4096);
  std::vector<size_t> order(records.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
  const auto t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  for (size_t k = 0; elapsed < seconds; ++k) {
    const RecordRef& r = records[order[k % order.size()]];
    Fd f{::open(r.path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC)};
    if (f.fd < 0) fail(r.path, ": cannot open with O_DIRECT: ", std::strerror(errno));
    const ssize_t got = ::pread(f.fd, buf.get(), (r.length + 4095) / 4096 * 4096, off_t(r.offset));
    if (got < 0) fail(r.path, ": O_DIRECT read failed: ", std::strerror(errno));
    *bytes += uint64_t(got);
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return double(*bytes) / elapsed;
}

// One io_uring read of the first 4 KiB of fd: "" when it worked, else why not.
std::string try_io_uring(int fd) {
#ifdef SLUICE_HAVE_URING
  io_uring ring{};
  int rc = io_uring_queue_init(2, &ring, 0);
  if (rc < 0) return cat("io_uring_queue_init: ", std::strerror(-rc), " (disabled by the kernel, a sysctl or the container)");
  auto buf = allocate_touched(4096, 4096);
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  io_uring_prep_read(sqe, fd, buf.get(), 4096, 0);
  io_uring_submit(&ring);
  io_uring_cqe* cqe = nullptr;
  rc = io_uring_wait_cqe(&ring, &cqe);
  const int res = rc < 0 ? rc : cqe->res;
  if (rc >= 0) io_uring_cqe_seen(&ring, cqe);
  io_uring_queue_exit(&ring);
  return res < 0 ? cat("a read failed: ", std::strerror(-res)) : "";
#else
  (void)fd;
  return "this sluice was built without liburing";
#endif
}

}  // namespace

CpuFacts cpu_facts() {
  CpuFacts c;
  c.threads = std::thread::hardware_concurrency();
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      c.model = line.substr(line.find(':') + 1);
      c.model.erase(0, c.model.find_first_not_of(' '));
      break;
    }
  for (const device::DeviceBackend& b : device::device_backends())
    if (b.name == "cpu") {
      c.isas = b.variants;
      c.active_isa = b.chosen;
    }
  return c;
}

MemoryFacts memory_facts() {
  MemoryFacts m;
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    uint64_t kb = 0;
    in >> kb;
    if (key == "MemTotal:") m.total = kb * 1024;
    if (key == "MemAvailable:") m.available = kb * 1024;
    in.ignore(1 << 10, '\n');
  }
  return m;
}

std::vector<BlockDevice> block_devices() {
  std::vector<BlockDevice> out;
  std::error_code ec;
  for (const fs::directory_entry& de : fs::directory_iterator("/sys/block", ec)) {
    const std::string name = de.path().filename().string();
    if (name.rfind("loop", 0) == 0 || name.rfind("ram", 0) == 0 || name.rfind("zram", 0) == 0) continue;
    BlockDevice b;
    b.name = name;
    b.model = first_line(de.path().string() + "/device/model");
    const std::string size = first_line(de.path().string() + "/size");
    b.bytes = size.empty() ? 0 : std::strtoull(size.c_str(), nullptr, 10) * 512;
    b.rotational = first_line(de.path().string() + "/queue/rotational") == "1";
    if (b.bytes > 0) out.push_back(b);
  }
  std::sort(out.begin(), out.end(), [](const BlockDevice& a, const BlockDevice& b) { return a.name < b.name; });
  return out;
}

DirProbe probe_dir(const std::string& path, const DirProbeOptions& opt) {
  DirProbe p;
  p.path = path;
  std::error_code ec;
  p.exists = fs::is_directory(path, ec);
  if (!p.exists) {
    p.o_direct_note = p.io_uring_note = p.read_note = "not a directory";
    return p;
  }
  struct statfs sf {};
  if (::statfs(path.c_str(), &sf) == 0) p.filesystem = filesystem_name(int64_t(sf.f_type));
  struct statvfs sv {};
  if (::statvfs(path.c_str(), &sv) == 0) {
    p.free_bytes = uint64_t(sv.f_bavail) * sv.f_frsize;
    p.total_bytes = uint64_t(sv.f_blocks) * sv.f_frsize;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    const std::string link = cat("/sys/dev/block/", major(st.st_dev), ":", minor(st.st_dev));
    if (fs::exists(link, ec)) p.device = fs::canonical(link, ec).filename().string();
  }

  // A file to try reads on: one already there, else a small one written for the probe.
  std::vector<RecordRef> records = opt.records;
  if (records.empty()) {
    try {
      records = home_file_records(path, opt.record_bytes);
    } catch (const Error&) {
      records.clear();
    }
  }
  std::string probe_file = records.empty() ? "" : records.front().path;
  std::string written;
  if (probe_file.empty()) {
    written = cat(path, "/.sluice-doctor-probe-", ::getpid());
    Fd f{::open(written.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
    std::vector<char> zeros(64 << 10, 0);
    if (f.fd < 0 || ::write(f.fd, zeros.data(), zeros.size()) != ssize_t(zeros.size())) {
      p.o_direct_note = p.io_uring_note = cat("no file here to read and none can be written (", std::strerror(errno), ")");
      written.clear();
    }
    probe_file = written;
  }
  if (!probe_file.empty()) {
    Fd f{::open(probe_file.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC)};
    if (f.fd < 0) {
      p.o_direct_note = cat("open(O_DIRECT): ", std::strerror(errno));
    } else {
      auto buf = allocate_touched(4096, 4096);
      if (::pread(f.fd, buf.get(), 4096, 0) < 0) p.o_direct_note = cat("an aligned O_DIRECT read: ", std::strerror(errno));
      else p.o_direct = true;
    }
    Fd g{f.fd >= 0 ? f.fd : ::open(probe_file.c_str(), O_RDONLY | O_CLOEXEC)};
    f.fd = -1;
    p.io_uring_note = g.fd < 0 ? cat("open: ", std::strerror(errno)) : try_io_uring(g.fd);
    p.io_uring = p.io_uring_note.empty();
  }
  if (!written.empty()) ::unlink(written.c_str());

  // The timed read: whole records, O_DIRECT, as the engine reads them.
  if (!p.o_direct) {
    p.read_note = "not measured: no O_DIRECT here";
  } else if (records.size() < 8) {
    p.read_note = cat("not measured: fewer than 8 pieces of ", opt.record_bytes >> 20,
                      " MiB to read here (prepare a model here, or `sluice bench drives --probe-mb N`)");
  } else {
    try {
      if (p.io_uring) {
        RawReadOptions ro;
        ro.queue_depth = opt.queue_depth;
        ro.seconds = opt.seconds;
        const RawReadResult r = raw_random_reads({records}, ro);
        p.read_bytes_per_s = r.bytes_per_s;
        p.read_bytes = r.bytes;
        p.read_engine = cat("io_uring O_DIRECT, queue depth ", opt.queue_depth);
      } else {
        p.read_bytes_per_s = pread_rate(records, opt.seconds, &p.read_bytes);
        p.read_engine = "pread O_DIRECT, one at a time";
      }
    } catch (const Error& e) {
      p.read_note = cat("not measured: ", e.what());
    }
  }
  return p;
}

}  // namespace sluice::bench
