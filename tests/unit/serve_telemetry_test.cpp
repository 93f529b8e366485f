// The telemetry stream's numbers: rates between consecutive samples (tokens/s, per-drive read
// bandwidth, the cache hit rate of the interval) and the bounded places of telemetry streams.
#include <gtest/gtest.h>

#include "serve/telemetry.h"

namespace sluice::serve {
namespace {

TEST(ServeTelemetry, RatesBetweenSamples) {
  TelemetryMeter meter;
  TelemetrySample a;
  a.seconds = 10;
  a.tokens = 100;
  a.streaming = true;
  a.store = {.requests = 50, .hits = 40, .misses = 10, .bytes_read = 1000};
  a.drives = {{"/d0", 5, 600, 0}, {"/d1", 4, 400, 0}};
  Json first = meter.next(a, 1);
  EXPECT_EQ(first["tokens_per_second"], 0.0);
  EXPECT_TRUE(first["cache"]["hit_rate"].is_null());  // no requests in an empty interval
  EXPECT_DOUBLE_EQ(first["cache"]["hit_rate_total"].get<double>(), 0.8);

  TelemetrySample b = a;
  b.seconds = 12;
  b.tokens = 130;
  b.generating = true;
  b.waiting = 2;
  b.store = {.requests = 60, .hits = 45, .misses = 15, .bytes_read = 5000};
  b.drives = {{"/d0", 9, 3600, 0}, {"/d1", 5, 1400, 1}};
  Json second = meter.next(b, 2);
  EXPECT_DOUBLE_EQ(second["interval_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(second["tokens_per_second"].get<double>(), 15.0);
  EXPECT_EQ(second["queue_depth"], 3);
  EXPECT_DOUBLE_EQ(second["cache"]["hit_rate"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(second["read_bytes_per_second"].get<double>(), 2000.0);
  ASSERT_EQ(second["drives"].size(), 2u);
  EXPECT_EQ(second["drives"][0]["path"], "/d0");
  EXPECT_DOUBLE_EQ(second["drives"][0]["read_bytes_per_second"].get<double>(), 1500.0);
  EXPECT_DOUBLE_EQ(second["drives"][1]["read_bytes_per_second"].get<double>(), 500.0);
  EXPECT_EQ(second["drives"][1]["errors"], 1);
  EXPECT_TRUE(second["gpu_tier"].is_null()) << "no device tier: null";
}

// With a device tier (streaming onto a GPU): its hit rate per interval and overall, and the rate
// at which it copied expert bytes to the device.
TEST(ServeTelemetry, DeviceTierRatesBetweenSamples) {
  TelemetryMeter meter;
  TelemetrySample a;
  a.seconds = 1;
  a.streaming = true;
  a.tier = {.present = true, .requests = 100, .hits = 25, .bytes_copied = 4000, .on_host = 10};
  Json first = meter.next(a, 1);
  ASSERT_TRUE(first["gpu_tier"].is_object());
  EXPECT_TRUE(first["gpu_tier"]["hit_rate"].is_null());
  EXPECT_DOUBLE_EQ(first["gpu_tier"]["hit_rate_total"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(first["gpu_tier"]["copy_bytes_per_second"].get<double>(), 0.0);
  TelemetrySample b = a;
  b.seconds = 3;
  b.tier = {.present = true, .requests = 140, .hits = 55, .bytes_copied = 10000, .on_host = 16};
  Json second = meter.next(b, 2);
  EXPECT_DOUBLE_EQ(second["gpu_tier"]["hit_rate"].get<double>(), 0.75);
  EXPECT_DOUBLE_EQ(second["gpu_tier"]["copy_bytes_per_second"].get<double>(), 3000.0);
  EXPECT_EQ(second["gpu_tier"]["on_host"], 16);
}

TEST(ServeTelemetry, StreamPlacesAreCappedAndGiveBack) {
  StreamSlots slots(2);
  auto a = slots.try_take(), b = slots.try_take();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(slots.try_take(), nullptr);
  EXPECT_EQ(slots.open(), 2u);
  auto copy = a;
  a.reset();
  EXPECT_EQ(slots.try_take(), nullptr);  // a copy still holds the place
  copy.reset();
  EXPECT_EQ(slots.open(), 1u);
  EXPECT_NE(slots.try_take(), nullptr);  // taken and given back at once
  EXPECT_EQ(slots.open(), 1u);
  StreamSlots none(0);
  EXPECT_EQ(none.try_take(), nullptr);
}

}  // namespace
}  // namespace sluice::serve
