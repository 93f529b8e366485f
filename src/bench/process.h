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
};

// Runs argv[0] with argv; `sample(t_s)` is called about every `sample_ms` (and once at exit).
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& stdout_path,
                          const std::string& stderr_path, double sample_ms,
                          const std::function<void(double)>& sample = {});

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
