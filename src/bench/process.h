// Child processes for the harness: launch a command with stdout/stderr to files, time it from
// fork to exit, and call a sampler at a fixed interval while it runs; block-device counters.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sluice::bench {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  double wall_s = 0;
  // From the kernel's accounting of the process and its waited-for children (wait4): peak resident
  // set and bytes read from storage (not from the page cache). -1 when unknown.
  int64_t max_rss_bytes = -1, storage_read_bytes = -1;
};

// A cgroup v1 memory cgroup that limits one run: its memory and page cache together. Made by
// `create` (root, /sys/fs/cgroup/memory mounted); removed when destroyed.
class MemoryCgroup {
 public:
  // Fails naming what is missing (no v1 memory controller, not root).
  static MemoryCgroup create(const std::string& name, uint64_t limit_bytes);
  MemoryCgroup(MemoryCgroup&& o) noexcept : dir_(std::move(o.dir_)), procs_(std::move(o.procs_)) { o.dir_.clear(); }
  MemoryCgroup& operator=(MemoryCgroup&&) = delete;
  ~MemoryCgroup();
  const std::string& procs_file() const { return procs_; }
  uint64_t peak_bytes() const;  // memory.max_usage_in_bytes
  uint64_t limit_hits() const;  // memory.failcnt: times an allocation met the limit
  bool oom_killed() const;      // memory.oom_control's oom_kill count > 0

 private:
  explicit MemoryCgroup(std::string dir) : dir_(std::move(dir)), procs_(dir_ + "/cgroup.procs") {}
  std::string dir_, procs_;
};

// Runs argv[0] (searched in PATH when it holds no '/') with argv; `sample(t_s)` is called about
// every `sample_ms` (and once at exit). With `cgroup_procs`, the child joins that cgroup (writes its
// pid there) before it executes the program.
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& stdout_path,
                          const std::string& stderr_path, double sample_ms,
                          const std::function<void(double)>& sample = {}, const std::string& cgroup_procs = "");

// Asks the kernel to drop the page-cache pages of every regular file under `path` (a file or a
// directory, recursively; symlinks followed), so that the next run reads them from storage: the
// cold start the runs of a bench must each have. Returns the bytes of the files it covered.
uint64_t evict_from_page_cache(const std::string& path);

// Runs a command and returns its stdout (stderr passes through); fails naming the command if it
// exits non-zero.
std::string capture_output(const std::vector<std::string>& argv);

// Path of this executable (/proc/self/exe).
std::string self_executable();

// The block device that holds `path`: its /sys/dev/block/MAJ:MIN/stat file, or "" if unknown.
std::string block_stat_file(const std::string& path);
// Sectors read (x 512 = bytes) from such a stat file; 0 if unreadable.
uint64_t block_bytes_read(const std::string& stat_file);

}  // namespace sluice::bench
