// Telemetry rates between samples and the bounded places of telemetry streams.
#include "serve/telemetry.h"

namespace sluice::serve {
namespace {

double rate(uint64_t now, uint64_t before, double seconds) {
  return seconds > 0 && now >= before ? double(now - before) / seconds : 0.0;
}

}  // namespace

Json TelemetryMeter::next(const TelemetrySample& s, int64_t unix_ms) {
  const TelemetrySample& p = have_previous_ ? previous_ : s;
  const double dt = s.seconds - p.seconds;
  Json cache = {{"hit_rate", nullptr},
                {"hit_rate_total", s.store.requests ? double(s.store.hits) / double(s.store.requests) : 0.0},
                {"requests", s.store.requests},
                {"hits", s.store.hits},
                {"misses", s.store.misses}};
  if (s.store.requests > p.store.requests)
    cache["hit_rate"] = double(s.store.hits - p.store.hits) / double(s.store.requests - p.store.requests);
  Json drives = Json::array();
  for (size_t i = 0; i < s.drives.size(); ++i) {
    const DriveSample& d = s.drives[i];
    const uint64_t before = i < p.drives.size() ? p.drives[i].bytes : d.bytes;
    drives.push_back(Json{{"path", d.path},
                          {"reads", d.reads},
                          {"bytes", d.bytes},
                          {"errors", d.errors},
                          {"read_bytes_per_second", rate(d.bytes, before, dt)}});
  }
  Json tier = nullptr;
  if (s.tier.present) {
    tier = {{"hit_rate", nullptr},
            {"hit_rate_total", s.tier.requests ? double(s.tier.hits) / double(s.tier.requests) : 0.0},
            {"requests", s.tier.requests},
            {"hits", s.tier.hits},
            {"bytes_copied", s.tier.bytes_copied},
            {"copy_bytes_per_second", rate(s.tier.bytes_copied, p.tier.bytes_copied, dt)},
            {"on_host", s.tier.on_host}};
    if (s.tier.requests > p.tier.requests)
      tier["hit_rate"] = double(s.tier.hits - p.tier.hits) / double(s.tier.requests - p.tier.requests);
  }
  Json j = {{"time_ms", unix_ms},
            {"interval_s", dt},
            {"generating", s.generating},
            {"waiting", s.waiting},
            {"queue_depth", s.waiting + (s.generating ? 1 : 0)},
            {"completed", s.completed},
            {"tokens", s.tokens},
            {"tokens_per_second", rate(uint64_t(s.tokens), uint64_t(p.tokens), dt)},
            {"streaming", s.streaming},
            {"cache", cache},
            {"bytes_read", s.store.bytes_read},
            {"read_bytes_per_second", rate(s.store.bytes_read, p.store.bytes_read, dt)},
            {"drives", drives},
            {"telemetry_streams", s.telemetry_streams},
            {"gpu_tier", tier}};
  previous_ = s;
  have_previous_ = true;
  return j;
}

std::shared_ptr<void> StreamSlots::try_take() {
  size_t now = counter_->load();
  do {
    if (now >= cap_) return nullptr;
  } while (!counter_->compare_exchange_weak(now, now + 1));
  // The place goes back when the last copy of the pointer is gone (which deletes nothing: the
  // pointer is only a non-null handle).
  return std::shared_ptr<void>(counter_.get(), [counter = counter_](void*) { --*counter; });
}

}  // namespace sluice::serve
