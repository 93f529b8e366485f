// fork/exec with redirected output, polling wait with a sampler, /sys block statistics.
#include "bench/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"

namespace sluice::bench {
namespace {

pid_t spawn(const std::vector<std::string>& argv, int out_fd, int err_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) fail("fork failed: ", std::strerror(errno));
  if (pid == 0) {
    if (out_fd >= 0) ::dup2(out_fd, 1);
    if (err_fd >= 0) ::dup2(err_fd, 2);
    ::execv(args[0], args.data());
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
                          const std::string& stderr_path, double sample_ms, const std::function<void(double)>& sample) {
  int out = open_out(stdout_path), err = open_out(stderr_path);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  pid_t pid = spawn(argv, out, err);
  ::close(out);
  ::close(err);
  ProcessResult r;
  auto interval = std::chrono::duration<double, std::milli>(sample_ms > 0 ? sample_ms : 50);
  auto next = t0;
  for (;;) {
    int status = 0;
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    auto now = clock::now();
    if (w == pid) {
      r.wall_s = std::chrono::duration<double>(now - t0).count();
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
