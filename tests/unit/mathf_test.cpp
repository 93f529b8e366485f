// The portable transcendentals of device/mathf.h against long double references: within a few
// ulp over sweeps of each function's range (they replace glibc's so that every device computes the
// same bits; they must still be as good as glibc's for the golden tolerances to mean anything).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device/cpu/kernels.h"
#include "device/cpu/lanes.h"
#include "device/device.h"
#include "device/mathf.h"

namespace sluice::mathf {
namespace {

// Distance in units in the last place between a float result and the exact value.
double ulps(float got, long double want) {
  if (std::isnan(got) || std::isnan(double(want))) return std::isnan(got) == std::isnan(double(want)) ? 0 : 1e30;
  if (std::isinf(double(want)) || std::isinf(got)) return float(want) == got ? 0 : 1e30;
  const float w = float(want);
  const float ulp = std::nextafter(std::fabs(w), INFINITY) - std::fabs(w);
  const double denorm_ulp = std::ldexp(1.0, -149);
  return double(std::fabs((long double)got - want)) / std::max(double(ulp), denorm_ulp);
}

template <typename F, typename R>
double worst_over(F f, R ref, float lo, float hi, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const float x = i < 2 ? (i == 0 ? lo : hi) : u(rng);
    worst = std::max(worst, ulps(f(x), ref((long double)x)));
  }
  return worst;
}

TEST(Mathf, ExpWithinTwoUlp) {
  auto f = [](float x) { return mathf::exp(x); };
  auto r = [](long double x) { return std::exp(x); };
  EXPECT_LE(worst_over(f, r, -20.0f, 20.0f, 200000, 1), 2.0);
  EXPECT_LE(worst_over(f, r, -87.0f, 88.7f, 200000, 2), 2.0);
  EXPECT_LE(worst_over(f, r, -0.01f, 0.01f, 100000, 3), 2.0);
  EXPECT_LE(worst_over(f, r, -103.0f, -87.0f, 50000, 4), 2.0);  // subnormal results
  EXPECT_EQ(mathf::exp(0.0f), 1.0f);
  EXPECT_TRUE(std::isinf(mathf::exp(89.0f)));
  EXPECT_EQ(mathf::exp(-104.0f), 0.0f);
  EXPECT_TRUE(std::isnan(mathf::exp(NAN)));
}

TEST(Mathf, Log1pWithinThreeUlp) {
  auto f = [](float x) { return mathf::log1p(x); };
  auto r = [](long double x) { return std::log1p(x); };
  EXPECT_LE(worst_over(f, r, -0.9999f, 1.0f, 200000, 5), 3.0);
  EXPECT_LE(worst_over(f, r, 1.0f, 5e8f, 200000, 6), 3.0);
  EXPECT_LE(worst_over(f, r, -1e-4f, 1e-4f, 100000, 7), 3.0);
  EXPECT_LE(worst_over(f, r, 1e-30f, 1e-20f, 10000, 8), 3.0);
  EXPECT_EQ(mathf::log1p(0.0f), 0.0f);
  EXPECT_TRUE(std::isinf(mathf::log1p(-1.0f)));
  EXPECT_TRUE(std::isnan(mathf::log1p(-2.0f)));
}

// 1 − 2/(e^{2|x|} + 1) loses a few bits just above the series' range (|x| ≈ 0.25-0.6): 6 ulp.
TEST(Mathf, TanhWithinSixUlp) {
  auto f = [](float x) { return mathf::tanh(x); };
  auto r = [](long double x) { return std::tanh(x); };
  EXPECT_LE(worst_over(f, r, -0.25f, 0.25f, 100000, 9), 2.0);
  EXPECT_LE(worst_over(f, r, -9.5f, 9.5f, 200000, 10), 6.0);
  EXPECT_LE(worst_over(f, r, -1e-5f, 1e-5f, 20000, 11), 2.0);
  EXPECT_EQ(mathf::tanh(20.0f), 1.0f);
  EXPECT_EQ(mathf::tanh(-20.0f), -1.0f);
}

TEST(Mathf, SigmoidSoftplusSitu) {
  auto sig = [](float x) { return mathf::sigmoid(x); };
  auto sig_ref = [](long double x) { return 1.0L / (1.0L + std::exp(-x)); };
  EXPECT_LE(worst_over(sig, sig_ref, -30.0f, 30.0f, 200000, 12), 4.0);
  auto sp = [](float x) { return mathf::softplus(x); };
  auto sp_ref = [](long double x) { return x > 20 ? x : std::log1p(std::exp(x)); };
  EXPECT_LE(worst_over(sp, sp_ref, -30.0f, 30.0f, 200000, 13), 4.0);
  std::mt19937_64 rng(14);
  std::normal_distribution<float> n(0.0f, 6.0f);
  for (int i = 0; i < 100000; ++i) {
    const float g = n(rng), u = n(rng) * 5.0f;
    const long double want = (4.0L * std::tanh(g / 4.0L) / (1.0L + std::exp(-(long double)g))) * (25.0L * std::tanh(u / 25.0L));
    ASSERT_LE(std::fabs((long double)mathf::situ(g, u, 4.0f, 25.0f) - want), 1e-5L * (1 + std::fabs(want))) << g << " " << u;
  }
}

// The CPU attention's four-lane exp is mathf::exp in every lane, bit for bit: a sweep of the
// whole float range (every 4093rd bit pattern, so both signs, subnormals, infinities and NaNs),
// each value alone among in-range neighbours and as four consecutive patterns.
TEST(Mathf, FourLaneExpIsMathfExpInEveryLane) {
  auto same = [](float a, float b) {
    uint32_t x, y;
    std::memcpy(&x, &a, 4);
    std::memcpy(&y, &b, 4);
    return x == y || (a != a && b != b);
  };
  int64_t bad = 0, vector_path = 0;
  float v[4];
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4093) {
    for (int k = 0; k < 4; ++k) {
      const uint32_t u = uint32_t(b + uint64_t(k) * 977);
      std::memcpy(&v[k], &u, 4);
    }
    const sluice::device::lanes::v4 x{v[0], v[1], v[2], v[3]}, alone{v[0], -1.0f, 0.5f, -80.0f};
    const sluice::device::lanes::v4 y = sluice::device::lanes::exp4(x), z = sluice::device::lanes::exp4(alone);
    for (int k = 0; k < 4; ++k) bad += !same(y[k], mathf::exp(v[k]));
    bad += !same(z[0], mathf::exp(v[0]));
    vector_path += v[0] >= -87.0f && v[0] <= 88.0f;
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(vector_path, 100000) << "the sweep must reach the vector path";
}

}  // namespace
}  // namespace sluice::mathf

namespace sluice::device {
namespace {

// Every ISA's gated activations give the scalar loop's bits (its own oracle, mathf.h's functions)
// for every element: a sweep of the whole float range for g and u (every 4093rd bit pattern: both
// signs, subnormals, infinities, NaNs, the exp paths past 2^±126), a fine sweep of [-120, 120]
// (where tanh, σ and the clamps change branch) and every tail length of a 16-lane loop. A NaN
// matches any NaN (which operand's payload an IEEE operation passes on is the compiler's operand
// order, in the scalar loop too).
TEST(Mathf, GatedActivationsOfEveryIsaAreTheScalarLoop) {
  auto same = [](float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (a != a && b != b); };
  std::vector<float> g0, u0;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4093) {
    const uint32_t gb = uint32_t(b), ub = uint32_t(b * 2654435761u + 12345u);
    float x, y;
    std::memcpy(&x, &gb, 4);
    std::memcpy(&y, &ub, 4);
    g0.push_back(x);
    u0.push_back(y);
  }
  for (int i = 0; i <= 240000; ++i) {
    g0.push_back(-120.0f + float(i) * 0.001f);
    u0.push_back(120.0f - float(i) * 0.001f * 1.37f);
  }
  Activation situ_k3{ActKind::SiTU, 4.0f, 25.0f}, situ_1{ActKind::SiTU, 1.0f, 1.0f}, silu{ActKind::SiLU},
      swiglu{ActKind::ClampedSwiGLU};
  auto bits_equal = [&](const std::vector<float>& a, const std::vector<float>& b, size_t n) {
    for (size_t i = 0; i < n; ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  };
  int isas = 0;
  for (const Isa* isa : available_isas()) {
    ++isas;
    for (const Activation& a : {situ_k3, situ_1, silu, swiglu}) {
      SCOPED_TRACE(std::string(isa->name) + " activation " + std::to_string(int(a.kind)));
      std::vector<float> want = g0, got = g0;
      gated_act_scalar(a, want.data(), u0.data(), int64_t(want.size()));
      isa->gated_act(a, got.data(), u0.data(), int64_t(got.size()));
      size_t first_bad = got.size();
      for (size_t i = 0; i < got.size() && first_bad == got.size(); ++i)
        if (!same(got[i], want[i])) first_bad = i;
      size_t nans = 0;
      for (float x : want) nans += x != x;
      EXPECT_GT(nans, 1000u) << "the sweep must reach NaN results";
      EXPECT_EQ(first_bad, got.size()) << "g=" << g0[std::min(first_bad, g0.size() - 1)]
                                       << " u=" << u0[std::min(first_bad, u0.size() - 1)];
      for (int64_t n = 1; n <= 40; ++n) {
        std::vector<float> t_want(g0.end() - 100000, g0.end() - 100000 + n), t_got = t_want;
        gated_act_scalar(a, t_want.data(), u0.data() + 7, n);
        isa->gated_act(a, t_got.data(), u0.data() + 7, n);
        EXPECT_TRUE(bits_equal(t_got, t_want, size_t(n))) << "length " << n;
      }
    }
  }
  EXPECT_GE(isas, 1);
}

// The ISA table's σ and SiLU of a row (KDA's conv and gates, the output gates) against mathf's
// scalar functions, on the same sweeps, every tail length and in place.
TEST(Mathf, UnaryActivationsOfEveryIsaAreTheScalarFunctions) {
  auto same = [](float a, float b) { return std::memcmp(&a, &b, 4) == 0 || (a != a && b != b); };
  std::vector<float> x0;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 4093) {
    const uint32_t xb = uint32_t(b);
    float x;
    std::memcpy(&x, &xb, 4);
    x0.push_back(x);
  }
  for (int i = 0; i <= 240000; ++i) x0.push_back(-120.0f + float(i) * 0.001f);
  int isas = 0;
  for (const Isa* isa : available_isas()) {
    ++isas;
    for (Unary f : {Unary::Sigmoid, Unary::Silu}) {
      SCOPED_TRACE(std::string(isa->name) + (f == Unary::Sigmoid ? " sigmoid" : " silu"));
      auto scalar = [f](float x) { return f == Unary::Sigmoid ? mathf::sigmoid(x) : mathf::silu(x); };
      std::vector<float> got(x0.size());
      isa->unary(f, x0.data(), got.data(), int64_t(x0.size()));
      size_t bad = 0, first_bad = x0.size();
      for (size_t i = 0; i < x0.size(); ++i)
        if (!same(got[i], scalar(x0[i]))) {
          ++bad;
          first_bad = std::min(first_bad, i);
        }
      EXPECT_EQ(bad, 0u) << "first at x=" << x0[std::min(first_bad, x0.size() - 1)];
      for (int64_t n = 1; n <= 40; ++n) {
        std::vector<float> t(x0.end() - 100000, x0.end() - 100000 + n), want = t;
        for (float& v : want) v = scalar(v);
        isa->unary(f, t.data(), t.data(), n);  // in place
        for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(same(t[size_t(i)], want[size_t(i)])) << "length " << n << " at " << i;
      }
    }
  }
  EXPECT_GE(isas, 1);
}

}  // namespace
}  // namespace sluice::device
