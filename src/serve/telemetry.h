// The live numbers behind GET /v1/telemetry: a sample of the server's counters (admission line,
// tokens generated, the expert store's hits and reads, bytes read per drive) taken about once a
// second, turned into rates between consecutive samples by a TelemetryMeter (one per stream), and
// a bounded set of stream places (each stream holds a connection for as long as it is open).
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/openai_request.h"

namespace sluice::serve {

// The expert store's running totals (zero when experts are resident).
struct StoreSample {
  uint64_t requests = 0, hits = 0, misses = 0, bytes_read = 0;
  uint64_t prefetch_issued = 0, prefetch_used = 0;
};

// The device tier's counters (store/device_tier.h), when the server streams onto a GPU.
struct TierSample {
  bool present = false;
  uint64_t requests = 0, hits = 0, bytes_copied = 0, on_host = 0;
};

struct DriveSample {
  std::string path;
  uint64_t reads = 0, bytes = 0, errors = 0;
};

struct TelemetrySample {
  double seconds = 0;  // a steady clock
  bool generating = false;
  size_t waiting = 0;
  int64_t completed = 0;
  int64_t tokens = 0;  // generated since the server started
  bool streaming = false;  // experts come from drives
  StoreSample store;
  TierSample tier;
  std::vector<DriveSample> drives;
  size_t telemetry_streams = 0;
};

// Rates over the time between the samples it is given, as one JSON event:
//   {"time_ms", "interval_s", "generating", "waiting", "queue_depth", "completed", "tokens",
//    "tokens_per_second", "streaming", "cache": {"hit_rate" (this interval, null without requests),
//    "hit_rate_total", "requests", "hits", "misses"}, "bytes_read", "read_bytes_per_second",
//    "drives": [{"path", "reads", "bytes", "errors", "read_bytes_per_second"}], "telemetry_streams",
//    "gpu_tier": null without a device tier, else {"hit_rate" (this interval, null without
//    requests), "hit_rate_total", "requests", "hits", "bytes_copied", "copy_bytes_per_second",
//    "on_host" (experts computed on the host's cores)}}
// The first event's rates are 0.
class TelemetryMeter {
 public:
  Json next(const TelemetrySample& s, int64_t unix_ms);

 private:
  bool have_previous_ = false;
  TelemetrySample previous_;
};

// At most `cap` places; a place is held while any copy of its pointer lives.
class StreamSlots {
 public:
  explicit StreamSlots(size_t cap) : cap_(cap) {}
  std::shared_ptr<void> try_take();
  size_t open() const { return counter_->load(); }
  size_t cap() const { return cap_; }

 private:
  size_t cap_;
  // Shared with the places' deleters, which may outlive this object.
  std::shared_ptr<std::atomic<size_t>> counter_ = std::make_shared<std::atomic<size_t>>(0);
};

}  // namespace sluice::serve
