// fork/exec with redirected output, polling wait with a sampler, /sys block statistics.
#include "bench/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"

namespace sluice::bench {
namespace {

pid_t spawn(const std::vector<std::string>& argv, int out_fd, int err_fd, const std::string& cgroup_procs = "") {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) fail("fork failed: ", std::strerror(errno));
  if (pid == 0) {
    if (out_fd >= 0) ::dup2(out_fd, 1);
    if (err_fd >= 0) ::dup2(err_fd, 2);
    if (!cgroup_procs.empty()) {
      int fd = ::open(cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
      char self[24];
      int n = std::snprintf(self, sizeof self, "%d", int(::getpid()));
      if (fd < 0 || ::write(fd, self, size_t(n)) != n) {
        std::fprintf(stderr, "cannot join the memory cgroup %s: %s\n", cgroup_procs.c_str(), std::strerror(errno));
        ::_exit(126);
      }
      ::close(fd);
    }
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "cannot execute %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  return pid;
}

int open_out(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, ": cannot create: ", std::strerror(errno));
  return fd;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& stdout_path,
                          const std::string& stderr_path, double sample_ms, const std::function<void(double)>& sample,
                          const std::string& cgroup_procs) {
  int out = open_out(stdout_path), err = open_out(stderr_path);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  pid_t pid = spawn(argv, out, err, cgroup_procs);
  ::close(out);
  ::close(err);
  ProcessResult r;
  auto interval = std::chrono::duration<double, std::milli>(sample_ms > 0 ? sample_ms : 50);
  auto next = t0;
  for (;;) {
    int status = 0;
    rusage use{};
    pid_t w = ::wait4(pid, &status, WNOHANG, &use);
    auto now = clock::now();
    if (w == pid) {
      r.wall_s = std::chrono::duration<double>(now - t0).count();
      r.max_rss_bytes = int64_t(use.ru_maxrss) * 1024;
      r.storage_read_bytes = int64_t(use.ru_inblock) * 512;
      if (sample) sample(r.wall_s);
      if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
      return r;
    }
    if (w < 0 && errno != EINTR) fail("waitpid failed: ", std::strerror(errno));
    if (sample && now >= next) {
      sample(std::chrono::duration<double>(now - t0).count());
      next += std::chrono::duration_cast<clock::duration>(interval);
      if (next < now) next = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

namespace {

const char* const kMemoryRoot = "/sys/fs/cgroup/memory";

uint64_t read_u64(const std::string& path) {
  std::ifstream in(path);
  uint64_t v = 0;
  if (!(in >> v)) fail(path, ": cannot read");
  return v;
}

void write_text(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open for writing: ", std::strerror(errno));
  bool ok = ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  int err = errno;
  ::close(fd);
  if (!ok) fail(path, ": cannot write '", text, "': ", std::strerror(err));
}

}  // namespace

MemoryCgroup MemoryCgroup::create(const std::string& name, uint64_t limit_bytes) {
  namespace fs = std::filesystem;
  if (!fs::exists(std::string(kMemoryRoot) + "/memory.limit_in_bytes"))
    fail("--memory-limit needs the cgroup v1 memory controller at ", kMemoryRoot, " (not mounted here)");
  const std::string dir = cat(kMemoryRoot, "/", name);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    fail("--memory-limit: cannot create the cgroup ", dir, ": ", std::strerror(errno),
         errno == EACCES || errno == EPERM ? " (run as root)" : "");
  MemoryCgroup g(dir);
  write_text(dir + "/memory.limit_in_bytes", std::to_string(limit_bytes));
  if (fs::exists(dir + "/memory.swappiness")) write_text(dir + "/memory.swappiness", "0");
  // A cgroup kept from an interrupted bench may hold an old peak; start from zero.
  write_text(dir + "/memory.max_usage_in_bytes", "0");
  write_text(dir + "/memory.failcnt", "0");
  return g;
}

MemoryCgroup::~MemoryCgroup() {
  if (!dir_.empty()) ::rmdir(dir_.c_str());  // its processes have exited; charges move to the parent
}

uint64_t MemoryCgroup::peak_bytes() const { return read_u64(dir_ + "/memory.max_usage_in_bytes"); }
uint64_t MemoryCgroup::limit_hits() const { return read_u64(dir_ + "/memory.failcnt"); }

bool MemoryCgroup::oom_killed() const {
  std::ifstream in(dir_ + "/memory.oom_control");
  std::string key;
  uint64_t v = 0;
  while (in >> key >> v)
    if (key == "oom_kill") return v > 0;
  return false;
}

uint64_t evict_from_page_cache(const std::string& path) {
  namespace fs = std::filesystem;
  uint64_t bytes = 0;
  auto evict = [&](const fs::path& p) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      ::fdatasync(fd);  // dirty pages cannot be dropped
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      bytes += uint64_t(st.st_size);
    }
    ::close(fd);
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::follow_directory_symlink |
                                                               fs::directory_options::skip_permission_denied, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec)) evict(it->path());
  } else {
    evict(path);
  }
  return bytes;
}

std::string capture_output(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) fail("pipe failed: ", std::strerror(errno));
  pid_t pid = spawn(argv, fds[1], -1);
  ::close(fds[1]);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string cmd;
    for (const auto& a : argv) cmd += (cmd.empty() ? "" : " ") + a;
    fail("`", cmd, "` failed (exit status ", WIFEXITED(status) ? WEXITSTATUS(status) : -1, ")");
  }
  return out;
}

std::string self_executable() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) fail("/proc/self/exe: cannot resolve this executable: ", std::strerror(errno));
  return std::string(buf, size_t(n));
}

std::string block_stat_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  std::string f = "/sys/dev/block/" + std::to_string(major(st.st_dev)) + ":" + std::to_string(minor(st.st_dev)) + "/stat";
  std::ifstream in(f);
  return in ? f : "";
}

uint64_t block_bytes_read(const std::string& stat_file) {
  std::ifstream in(stat_file);
  uint64_t reads = 0, merged = 0, sectors = 0;
  if (!(in >> reads >> merged >> sectors)) return 0;
  return sectors * 512;
}

}  // namespace sluice::bench
