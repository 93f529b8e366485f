// What this machine offers a streamed model, as `sluice doctor` reports it: the CPU (model, threads,
// ISAs and the active one), memory (total and available), block devices, and for a directory (a
// home, a model directory) its filesystem and drive, free space, whether O_DIRECT and io_uring
// reads work there, and a short timed O_DIRECT read rate over files already there.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/raw_read.h"

namespace sluice::bench {

struct CpuFacts {
  std::string model;  // /proc/cpuinfo's "model name" ("" when absent)
  unsigned threads = 0;
  std::vector<std::string> isas;  // available, scalar first
  std::string active_isa;
};
CpuFacts cpu_facts();

struct MemoryFacts {
  uint64_t total = 0, available = 0;  // /proc/meminfo MemTotal, MemAvailable
};
MemoryFacts memory_facts();

struct BlockDevice {
  std::string name, model;  // "nvme0n1", the device's model string
  uint64_t bytes = 0;
  bool rotational = false;
};
// /sys/block's disks (loop, ram and zram devices left out).
std::vector<BlockDevice> block_devices();

struct DirProbeOptions {
  double seconds = 0.5;               // the timed read
  uint64_t record_bytes = 2u << 20;   // bytes per read (4 KiB multiple)
  int queue_depth = 4;
  std::vector<RecordRef> records;     // what to read; empty: record-sized pieces of the files under the directory
};

struct DirProbe {
  std::string path;
  bool exists = false;
  std::string filesystem;  // "ext4", "xfs", "tmpfs", "overlayfs", ... (statfs magic)
  std::string device;      // the block device holding it ("nvme0n1p2"), "" when none (tmpfs, overlay)
  uint64_t free_bytes = 0, total_bytes = 0;
  bool o_direct = false, io_uring = false;
  std::string o_direct_note, io_uring_note;  // why not, when not
  double read_bytes_per_s = 0;               // 0: not measured (read_note says why)
  uint64_t read_bytes = 0;
  std::string read_engine, read_note;
};
DirProbe probe_dir(const std::string& path, const DirProbeOptions& opt);

}  // namespace sluice::bench
