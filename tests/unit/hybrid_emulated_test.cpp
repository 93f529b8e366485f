// The GPU host's split of experts run end to end on the emulated accelerator (`cpu-emu`: the CPU's
// kernels behind an expert tier in memory of its own): every pass's experts go through the tier
// or, in decode passes, a share of them to the host's cores, and since both sides are the CPU's
// kernels the logits must be the resident CPU run's bits. It covers what only the H100 covered
// before: the share planned from measured rates (calibration file written once, then read), the
// activations handed to the host, the host's rows moved into the device's expert outputs, and
// long passes that compute no expert on the host.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "model/registry.h"
#include "model_test_util.h"
#include "prompt_util.h"
#include "device/device.h"
#include "store/hybrid_plan.h"

namespace sluice {
namespace {

std::vector<float> one_row_logits(model::Target& t, const std::vector<int32_t>& ids) {
  auto st = t.new_state();
  const size_t V = size_t(t.info().vocab_size);
  std::vector<float> lg(ids.size() * V);
  for (size_t i = 0; i < ids.size(); ++i) t.forward(*st, std::span<const int32_t>(&ids[i], 1), {}, lg.data() + i * V);
  return lg;
}

TEST(HybridEmulated, ExpertsSplitBetweenTheCoresAndATierGiveTheResidentCpuBits) {
  for (const char* fixture : {"kimi_k2_int4", "k3_tiny_a", "gpt_oss_a"}) {
    SCOPED_TRACE(fixture);
    const std::string src = testing::fixture_dir(fixture);
    const std::vector<int32_t> ids = testing::tokens_of(12, 3);
    auto resident = model::load_target(model::LoadOptions{.dir = src});
    const std::vector<float> want_rows = one_row_logits(*resident, ids);
    const std::vector<float> want_pass = testing::all_logits(*resident, ids);
    const uint64_t slot = model::expert_bank_of(src).layout.slot_bytes;
    for (const std::string share : {"0.5", "auto"}) {
      SCOPED_TRACE(share);
      testing::TempDir dir("hybrid-emu");
      std::filesystem::copy(src, dir / "m", std::filesystem::copy_options::recursive);
      std::filesystem::remove(dir / "m/expected.safetensors");
      const std::string calibration = dir / "rates.json";
      ::setenv("SLUICE_CALIBRATION", calibration.c_str(), 1);
      // A tier of 3 slots (evictions in every pass) in front of a RAM cache of 8 records, behind a
      // link of 0.5 GB/s (slow next to the cores even under a sanitizer: auto gives the cores a
      // large share).
      auto e = testing::streamed_engine(dir, dir / "m", 8 * double(slot) / 1e9, "cpu-emu:4:0.5",
                                        std::to_string(3 * double(slot) / 1e9), share);
      ::unsetenv("SLUICE_CALIBRATION");
      ASSERT_NE(e->tier(), nullptr);
      EXPECT_EQ(0, std::memcmp(testing::all_logits(e->model(), ids).data(), want_pass.data(), want_pass.size() * 4))
          << "a 12-row pass through the tier differs from resident";
      EXPECT_EQ(e->tier()->counters().on_host, 0u) << "a 12-row pass computed experts on the host";
      EXPECT_EQ(0, std::memcmp(one_row_logits(e->model(), ids).data(), want_rows.data(), want_rows.size() * 4))
          << "one-row passes with the host's share differ from resident";
      const nlohmann::json tier = e->stats_json()["gpu_tier"];
      const double planned = tier["cpu_share"].get<double>();
      EXPECT_GT(planned, 0);
      EXPECT_LT(planned, 1);
      EXPECT_GT(e->tier()->counters().on_host, 0u) << "share " << planned;
      EXPECT_GT(e->tier()->counters().copies, 0u);
      if (share == "auto") {  // measured once into the file, then read from it: the same plan
        ASSERT_EQ(store::read_hybrid_calibrations(calibration).size(), 1u);
        ::setenv("SLUICE_CALIBRATION", calibration.c_str(), 1);
        testing::TempDir dir2("hybrid-emu2");
        std::filesystem::copy(dir / "m", dir2 / "m", std::filesystem::copy_options::recursive);
        std::filesystem::remove(dir2 / "m/sluice-manifest.json");
        auto again = testing::streamed_engine(dir2, dir2 / "m", 8 * double(slot) / 1e9, "cpu-emu:4:0.5",
                                              std::to_string(3 * double(slot) / 1e9), share);
        ::unsetenv("SLUICE_CALIBRATION");
        EXPECT_EQ(again->stats_json()["gpu_tier"]["cpu_share"].get<double>(), planned);
        EXPECT_NE(again->stats_json()["gpu_tier"]["cpu_share_from"].get<std::string>().find("rates of"),
                  std::string::npos);
      }
    }
  }
}

// The emulated device refuses what it cannot be: a malformed spec names what was wrong, and its
// memory bounds the tier (allocations past it are refused, so the tier takes fewer slots).
TEST(HybridEmulated, EmulatedDeviceSpecsAndMemory) {
  for (const char* bad : {"cpu-emu:", "cpu-emu:x", "cpu-emu:4:0", "cpu-emu:4:2:1"})
    EXPECT_THROW(device::open_device(bad), std::exception) << bad;
  auto d = device::open_device("cpu-emu:0.001");
  EXPECT_EQ(d->place(), device::Place::Device);
  EXPECT_EQ(d->memory().total, 1000000u);
  void* a = d->alloc_bytes(600000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(d->alloc_bytes(600000), nullptr) << "past the emulated memory";
  EXPECT_EQ(d->memory().free, 400000u);
  d->free_bytes(a);
  EXPECT_EQ(d->memory().free, 1000000u);
}

}  // namespace
}  // namespace sluice
