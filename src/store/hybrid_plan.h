// A GPU host's split of a decode pass's expert misses: each layer's experts that are not in HBM
// are either copied over the link and computed on the GPU, or computed on the host's cores from
// RAM (store/device_tier.h). Which experts go to the cores is a plan fixed for the session; how
// many is decided here, from rates measured on this machine and kept in a calibration file, so two
// runs on one machine give the same bits and the first run of a new machine measures (about a
// second) and says so.
//
// The cost model. Per MoE layer a decode pass asks for k experts; a fraction f of the bank is held
// in HBM. With a share s of each layer's experts planned for the cores, the cores compute k·s
// records at C bytes/s while the link copies the GPU side's misses, k·((1 - s) - f) records at P
// bytes/s (uniform routing: the tier holds f of every layer's experts, all of them GPU-side). Both
// finish together when s / C = ((1 - s) - f) / P, i.e. s = (1 - f)·C / (P + C). C and P are each
// measured while the other runs: the copy engine reads the same host memory the cores read.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "device/device.h"

namespace sluice::store {

struct HybridRates {
  double link = 0, cores = 0;                // bytes of expert records a second, each alone
  double link_shared = 0, cores_shared = 0;  // each while the other runs
};

// "link 55.0 GB/s, cores 94.0 GB/s alone; 51.0 + 80.0 at once": how the engine, its statistics and
// doctor print the rates.
std::string hybrid_rates_text(const HybridRates& r);
// {"link", "cores", "link_shared", "cores_shared"} in bytes/s: the calibration file's entry.
nlohmann::json hybrid_rates_json(const HybridRates& r);

// Measures, for experts shaped as `sample` (a host view of one record): copies of the record into
// `gpu`'s memory through pinned host memory, and the CPU device computing one row through
// `per_pass` experts at a time on every core of the pool, first alone and then at once, each for
// about `seconds`, over enough copies of the record (≥ 1 GB when they fit in 4096) that the CPU's
// caches cannot hold them.
HybridRates measure_hybrid_rates(device::Device& gpu, const device::ExpertView& sample, int per_pass, double seconds);

// The share of each layer's experts that decode passes compute on the host's cores when a fraction
// `resident` (0..1) of the bank fits in HBM: (1 - resident)·C / (P + C) with the shared rates,
// rounded to 0.01; 0 when everything fits or nothing was measured.
double hybrid_share(const HybridRates& r, double resident);

// "MXFP4 2048x7168 MXFP4 2048x7168 MXFP4 7168x2048, 16 threads on NVIDIA H100 80GB HBM3": what the
// rates of a calibration depend on.
std::string hybrid_calibration_key(const std::string& device_name, const device::ExpertView& sample, int threads);
// $SLUICE_CALIBRATION, else $XDG_CACHE_HOME/sluice/hybrid-rates.json, else
// ~/.cache/sluice/hybrid-rates.json.
std::string hybrid_calibration_path();
// The rates stored under `key`; false when the file or the key is absent. A file that is not a
// calibration is refused naming it.
bool read_hybrid_calibration(const std::string& path, const std::string& key, HybridRates* out);
// Every key's rates in the file (none when it is absent), refused as read_hybrid_calibration does.
std::vector<std::pair<std::string, HybridRates>> read_hybrid_calibrations(const std::string& path);
// Adds or replaces `key`'s rates, atomically (the other keys stay).
void write_hybrid_calibration(const std::string& path, const std::string& key, const HybridRates& r);

}  // namespace sluice::store
