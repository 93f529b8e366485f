// The refactor gate, kept as a regression test: the logits of every golden fixture and of the
// default models (whole-prompt passes, token-by-token decoding, a verify pass committed at a
// prefix, DSpark captures and proposals) on every CPU ISA, as xxh3 digests of their bytes, must
// equal the recorded digests (tests/fixtures/logit_gate/digests.txt). They were first written by
// tools/gate/digest_old.cpp built against commit 85b4594, the engine before the device/target
// refactor, and the refactor matched them bit for bit. A deliberate change of the arithmetic
// re-records them with tools/gate/record_digests.sh and says so in its commit; the one so far:
// the CPU's exp/log1p/tanh became device/mathf.h's, shared with the CUDA device. Digests are kept
// per kernel set (kernel_set_name): AVX-512 with the VBMI kernels sums FP8 blocks in another order
// than AVX-512 without them, whose digests are the earlier "avx512" ones.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "device/cpu/kernels.h"
#include "logit_digests.h"

namespace sluice {
namespace {

TEST(LogitGate, EveryFixtureAndDefaultModelMatchesTheRecordedDigests) {
  if (const char* path = std::getenv("SLUICE_RECORD_DIGESTS")) {
    // tools/gate/record_digests.sh: write this engine's digests instead of checking them.
    std::ofstream out(path);
    for (const device::Isa* isa : device::isa_variants())
      for (const auto& [name, value] : testing::compute(isa->name).got)
        out << device::kernel_set_name(*isa) << " " << name << " " << value << "\n";
    GTEST_SKIP() << "recorded digests to " << path;
  }
  const auto want = testing::recorded_digests();
  ASSERT_FALSE(want.empty()) << "no recorded digests";
  const std::string before = device::active_isa().name;
  int checked = 0;
  for (const device::Isa* isa : device::isa_variants()) {
    const char* set = device::kernel_set_name(*isa);
    ASSERT_TRUE(want.count(set)) << "no digests recorded for kernel set " << set;
    const testing::Digests d = testing::compute(isa->name);
    const auto& w = want.at(set);
    EXPECT_EQ(d.got.size(), w.size()) << isa->name;
    for (const auto& [name, value] : w) {
      auto it = d.got.find(name);
      ASSERT_NE(it, d.got.end()) << isa->name << " " << name << " was not computed";
      EXPECT_EQ(it->second, value) << isa->name << " " << name << ": logits differ from the recorded engine's";
      ++checked;
    }
  }
  device::set_active_isa(before);
  std::printf("[gate] %d digests bit-identical over %zu kernel sets\n", checked, device::isa_variants().size());
}

}  // namespace
}  // namespace sluice
