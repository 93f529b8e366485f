// Every op of the device interface on every available device (device::available_devices(): the
// CPU ISAs today, GPUs where a build and a machine have them) against the scalar CPU device, the
// oracle: fresh random inputs at odd sizes and at Kimi K3 widths; outputs poisoned before each run
// and checked fully written, with guard rows and columns around them that must keep their poison;
// a T-row call equal to T one-row calls bit for bit on each device. Products (linear, experts)
// must stay within the sum-order bound of kernels_test; every other op must be bit-identical to
// scalar on every device (the CUDA kernels use mathf.h's transcendentals and unfused arithmetic),
// and cuda-ref's products too.
// A few independent references check the oracle itself (attention with sinks and windows, the
// router's top-k).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "device/device.h"
#include "device/mathf.h"
#include "test_seed.h"

namespace sluice::device {
namespace {

using testing::test_seed;

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
const float kPoison = [] {
  const uint32_t b = 0x7fc0bad5u;  // a quiet NaN no op writes
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}();

// ---- host-side random data ----

struct Rand {
  std::mt19937_64 rng;
  explicit Rand(uint64_t s) : rng(s) {}
  float normal(float sd = 1.0f) { return std::normal_distribution<float>(0.0f, sd)(rng); }
  std::vector<float> normals(int64_t n, float sd = 1.0f) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = normal(sd);
    return v;
  }
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
};

// A weight with owned host bytes, and the exact value of each element (for the bound).
struct HostWeight {
  Weight w;
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> bytes, scale_bytes;
  std::vector<float> block_scales, bias;  // bias: its exact values
  std::vector<uint16_t> bias_bf16;
  std::vector<uint32_t> words;  // INT4_G32 codes, with BF16 group scales in bf16
  double at(int64_t r, int64_t c) const {
    switch (w.type) {
      case WeightType::F32: return f32[size_t(r * w.cols + c)];
      case WeightType::BF16: return bf16_to_f32(bf16[size_t(r * w.cols + c)]);
      case WeightType::MXFP4: {
        const uint8_t b = bytes[size_t((r * w.cols + c) / 2)];
        return double(kE2M1Values[c % 2 == 0 ? b & 15 : b >> 4]) *
               std::ldexp(1.0, int(scale_bytes[size_t(r * (w.cols / 32) + c / 32)]) - 127);
      }
      case WeightType::FP8_E4M3: {
        const uint8_t b = bytes[size_t(r * w.cols + c)];
        const int e = (b >> 3) & 15, m = b & 7;
        const double mag = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(double(8 + m), e - 10);
        const int64_t cb = (w.cols + kFp8Block - 1) / kFp8Block;
        return (b & 0x80 ? -mag : mag) * block_scales[size_t((r / kFp8Block) * cb + c / kFp8Block)];
      }
      case WeightType::INT4_G32: {
        // bf16(q·s) (kernels_test checks the kernels against the format's definition).
        const int q = int((words[size_t((r * w.cols + c) / 8)] >> (4 * (c % 8))) & 15) - 8;
        return bf16_to_f32(f32_to_bf16(float(q) * bf16_to_f32(bf16[size_t(r * (w.cols / 32) + c / 32)])));
      }
    }
    return 0;
  }
};

HostWeight random_weight(WeightType type, int64_t rows, int64_t cols, Rand& r, bool with_bias = false) {
  HostWeight h;
  h.w.type = type;
  h.w.rows = rows;
  h.w.cols = cols;
  const float sd = 1.0f / std::sqrt(float(cols));
  switch (type) {
    case WeightType::F32:
      h.f32 = r.normals(rows * cols, sd);
      h.w.data = h.f32.data();
      break;
    case WeightType::BF16:
      for (float v : r.normals(rows * cols, sd)) h.bf16.push_back(f32_to_bf16(v));
      h.w.data = h.bf16.data();
      break;
    case WeightType::MXFP4:
      for (int64_t i = 0; i < rows * cols / 2; ++i) h.bytes.push_back(uint8_t(r.uniform(0, 255)));
      for (int64_t i = 0; i < rows * cols / 32; ++i) h.scale_bytes.push_back(uint8_t(r.uniform(118, 131)));  // 2^-9 .. 2^4: both sides of 2^1
      h.w.data = h.bytes.data();
      h.w.scales = h.scale_bytes.data();
      break;
    case WeightType::FP8_E4M3: {
      for (int64_t i = 0; i < rows * cols; ++i) {
        uint8_t b;
        do b = uint8_t(r.uniform(0, 255));
        while ((b & 0x7f) == 0x7f);
        h.bytes.push_back(b);
      }
      const int64_t n = ((rows + kFp8Block - 1) / kFp8Block) * ((cols + kFp8Block - 1) / kFp8Block);
      for (int64_t i = 0; i < n; ++i) h.block_scales.push_back(0.002f + 0.001f * float(r.uniform(0, 8)));
      h.w.data = h.bytes.data();
      h.w.scales = h.block_scales.data();
      break;
    }
    case WeightType::INT4_G32: {
      // Random codes; positive BF16 scales with q·s of about sd (|q| is about 4.6 on average).
      for (int64_t i = 0; i < rows * cols / 8; ++i) h.words.push_back(uint32_t(r.uniform(0, 0xffffffffll)));
      for (int64_t i = 0; i < rows * cols / 32; ++i)
        h.bf16.push_back(f32_to_bf16(sd / 4.6f * (0.75f + 0.125f * float(r.uniform(0, 4)))));
      h.w.data = h.words.data();
      h.w.scales = h.bf16.data();
      break;
    }
  }
  if (with_bias && type == WeightType::MXFP4) {  // a BF16 bias, as gpt-oss's experts carry
    for (float v : r.normals(rows)) {
      h.bias_bf16.push_back(f32_to_bf16(v));
      h.bias.push_back(bf16_to_f32(h.bias_bf16.back()));
    }
    h.w.bias = h.bias_bf16.data();
    h.w.bias_type = DType::BF16;
  } else if (with_bias) {
    h.bias = r.normals(rows);
    h.w.bias = h.bias.data();
    h.w.bias_type = DType::F32;
  }
  return h;
}

// ---- device-side buffers ----

// An input uploaded to a device.
struct In {
  DeviceBuffer mem;
  Buf buf() const { return mem.buf(); }
};
In upload(Device& d, BufType t, int64_t rows, int64_t cols, const void* host) {
  In in{DeviceBuffer(d, t, rows, cols)};
  d.upload(in.buf(), host);
  return in;
}
In upload(Device& d, const std::vector<float>& v, int64_t rows, int64_t cols) {
  return upload(d, BufType::F32, rows, cols, v.data());
}

// An output: a view inside a larger allocation whose border (one row and one column on each side)
// and body start as poison. check() verifies the border kept it and the body lost it.
struct Out {
  DeviceBuffer mem;
  Buf view;
  int64_t rows = 0, cols = 0;
};
Out make_out(Device& d, BufType t, int64_t rows, int64_t cols) {
  Out o{DeviceBuffer(d, t, rows + 2, cols + 2), {}, rows, cols};
  d.fill(o.mem.buf(), kPoison);
  o.view = o.mem.buf().rows_view(1, rows).cols_view(1, cols);
  return o;
}
std::vector<float> read(Device& d, const Buf& b) {
  std::vector<float> v(static_cast<size_t>(b.rows * b.cols));
  if (!v.empty()) d.download(b, v.data());
  return v;
}
// The body (row-major), after checking the guards and that no poison is left in it.
std::vector<float> check(Device& d, const Out& o, const std::string& what) {
  const std::vector<float> all = read(d, o.mem.buf());
  const int64_t W = o.cols + 2;
  std::vector<float> body;
  int leaks = 0, holes = 0;
  for (int64_t r = 0; r < o.rows + 2; ++r)
    for (int64_t c = 0; c < W; ++c) {
      const float v = all[size_t(r * W + c)];
      const bool border = r == 0 || r == o.rows + 1 || c == 0 || c == W - 1;
      if (border) {
        leaks += bits(v) != bits(kPoison);
      } else {
        holes += bits(v) == bits(kPoison);
        body.push_back(v);
      }
    }
  EXPECT_EQ(leaks, 0) << what << ": wrote outside its output";
  EXPECT_EQ(holes, 0) << what << ": left part of its output unwritten";
  return body;
}

// ---- the device list and comparisons ----

struct Devices {
  std::unique_ptr<Device> scalar;
  std::vector<std::unique_ptr<Device>> all;  // every available device, the scalar one included
  Devices() {
    scalar = open_device("cpu:scalar");
    for (const std::string& name : available_devices()) all.push_back(open_device(name));
  }
};
Devices& devices() {
  static Devices d;
  return d;
}
// cuda-ref claims the scalar order for every op, products included.
bool is_reference(const Device& d) { return d.name().rfind("cuda-ref:", 0) == 0; }
bool has_gpu() {
  for (auto& d : devices().all)
    if (d->place() != Place::Host) return true;
  return false;
}

void expect_identical(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (bits(want[i]) != bits(got[i]) && !(std::isnan(want[i]) && std::isnan(got[i])))
      if (bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << want.size() << " values differ, first at " << first << " ("
                     << (bad ? want[first] : 0) << " vs " << (bad ? got[first] : 0) << ")";
}

// |got − want| <= bound[i] for each element (products: the sum-order bound of every output).
void expect_within(const std::vector<float>& want, const std::vector<float>& got, const std::vector<double>& bound,
                   const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  double worst = 0;
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = std::fabs(double(got[i]) - double(want[i]));
    worst = std::max(worst, e / std::max(bound[i], 1e-30));
    bad += !(e <= bound[i]);
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " outputs outside the bound (worst " << worst << "x the bound)";
  std::printf("[ops] %s: max error %.3g of the bound\n", what.c_str(), worst);
}

double sum_order_bound(int64_t k, double abs_sum) { return std::max(1e-5, 2.0 * double(k) * std::ldexp(1.0, -24)) * abs_sum + 1e-30; }

// Runs `op` (which returns its outputs) on the scalar device and on every device, comparing with
// `compare` (exact by default; products pass their bound). A reference GPU ISA must match scalar
// bit for bit whatever `compare` allows.
using OpRun = std::function<std::vector<float>(Device&)>;
void on_every_device(const std::string& what, const OpRun& op,
                     const std::function<void(const std::vector<float>&, const std::vector<float>&,
                                              const std::string&)>& compare = expect_identical) {
  SCOPED_TRACE("seed " + std::to_string(test_seed()));
  const std::vector<float> want = op(*devices().scalar);
  for (auto& d : devices().all) {
    const std::string label = what + " on " + d->name();
    const std::vector<float> got = op(*d);
    compare(want, got, label);
    if (is_reference(*d)) expect_identical(want, got, label + " (reference ISA: bit for bit)");
  }
}

// A GPU ISA that sums rows its own way (the fast `cuda`: block-wide trees for norms and AttnRes):
// those ops must stay within `bound` of scalar there, and bit-identical on every other device.
bool sums_rows_its_own_way(const Device& d) { return d.place() != Place::Host && !is_reference(d); }
void on_every_device_rows(const std::string& what, const OpRun& op,
                          const std::function<std::vector<double>(const std::vector<float>&)>& bound) {
  SCOPED_TRACE("seed " + std::to_string(test_seed()));
  const std::vector<float> want = op(*devices().scalar);
  for (auto& d : devices().all) {
    const std::string label = what + " on " + d->name();
    const std::vector<float> got = op(*d);
    if (sums_rows_its_own_way(*d)) expect_within(want, got, bound(want), label);
    else expect_identical(want, got, label);
  }
}
// RMSNorm's outputs move with the sum of squares: a row of K elements summed in another order is
// within 2K·2^-24 of it relatively, and so is the scale (square root and division are the same).
std::vector<double> rmsnorm_bound(const std::vector<float>& want, int64_t k) {
  std::vector<double> b(want.size());
  for (size_t i = 0; i < want.size(); ++i) b[i] = std::fabs(double(want[i])) * (2.0 * double(k) + 8.0) * 0x1p-24 + 1e-30;
  return b;
}

// ---- cases ----

// Names the GPUs the cases below ran on, or says visibly that none did (CI has nvcc, no GPU).
TEST(BackendOps, GpuDevicesRunEveryCase) {
  if (!has_gpu()) GTEST_SKIP() << "no CUDA device on this machine: every case ran on the CPU ISAs only";
  for (auto& d : devices().all)
    if (d->place() != Place::Host) std::printf("[ops] GPU device %s\n", d->name().c_str());
}

TEST(BackendOps, LinearEveryFormatWithinTheBoundAndBatchInvariant) {
  Rand r(test_seed());
  struct Shape {
    WeightType type;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{WeightType::F32, 13, 37},         {WeightType::BF16, 29, 100},
                          {WeightType::MXFP4, 17, 96},        {WeightType::FP8_E4M3, 200, 300},
                          {WeightType::INT4_G32, 21, 160},    {WeightType::BF16, 384, 7168},
                          {WeightType::MXFP4, 64, 3584},      {WeightType::INT4_G32, 48, 7168},
                          {WeightType::FP8_E4M3, 200, 304},   {WeightType::BF16, 40, 104}};
  // x sits in a wider buffer: the op must honour the row stride. At an odd stride and offset the
  // GPU's fast ISA takes its reference kernels; at a stride of 8 more and an offset of 4 floats
  // (16-byte rows) its fast products, where the shape allows them.
  for (size_t si = 0; si < 2 * std::size(shapes); ++si) {
    const Shape& s = shapes[si / 2];
    const int64_t pad = si % 2 ? 8 : 5;
    const int64_t off = pad == 5 ? 2 : 4, ld = s.cols + pad;
    for (int64_t T : {int64_t(1), int64_t(3), int64_t(17)}) {
      if (s.cols == 7168 && T == 17) continue;  // the K3 width once or twice is enough
      HostWeight a = random_weight(s.type, s.rows, s.cols, r, /*with_bias=*/T == 3);
      HostWeight b = random_weight(s.type, s.rows / 2 + 1, s.cols, r);
      const std::vector<float> x = r.normals(T * ld);
      std::vector<double> bound;
      for (const HostWeight* h : {&a, &b})
        for (int64_t t = 0; t < T; ++t)
          for (int64_t o = 0; o < h->w.rows; ++o) {
            double abs_sum = 0;
            for (int64_t c = 0; c < s.cols; ++c) abs_sum += std::fabs(h->at(o, c) * x[size_t(t * ld + c + off)]);
            if (!h->bias.empty()) abs_sum += std::fabs(h->bias[size_t(o)]);
            bound.push_back(sum_order_bound(s.cols, abs_sum));
          }
      const std::string what = std::string("linear/") + weight_type_name(s.type) + " " + std::to_string(s.rows) + "x" +
                               std::to_string(s.cols) + " T=" + std::to_string(T) + (T == 3 ? " +bias" : "") +
                               (pad == 8 ? " aligned" : "");
      auto run = [&](Device& d) {
        In xin = upload(d, x, T, ld);
        const Weight wa = d.keep(a.w), wb = d.keep(b.w);
        Out ya = make_out(d, BufType::F32, T, a.w.rows), yb = make_out(d, BufType::F32, T, b.w.rows);
        const LinearOut outs[] = {{&wa, ya.view}, {&wb, yb.view}};
        const Buf xs = xin.buf().cols_view(off, s.cols);
        d.linear(xs, outs);
        std::vector<float> got = check(d, ya, what);
        const std::vector<float> gb = check(d, yb, what);
        // Row t alone gives the same bits as row t of the batch.
        for (int64_t t = 0; t < T; ++t) {
          Out one = make_out(d, BufType::F32, 1, a.w.rows);
          const LinearOut single[] = {{&wa, one.view}};
          d.linear(xs.rows_view(t, 1), single);
          const std::vector<float> g1 = check(d, one, what + " one row");
          expect_identical(std::vector<float>(got.begin() + t * a.w.rows, got.begin() + (t + 1) * a.w.rows), g1,
                           what + " row " + std::to_string(t) + " alone on " + d.name());
        }
        // Output rows of both weights, in the order of `bound`.
        std::vector<float> out;
        for (int64_t t = 0; t < T; ++t) out.insert(out.end(), got.begin() + t * a.w.rows, got.begin() + (t + 1) * a.w.rows);
        for (int64_t t = 0; t < T; ++t) out.insert(out.end(), gb.begin() + t * b.w.rows, gb.begin() + (t + 1) * b.w.rows);
        return out;
      };
      // Outputs and bounds are both in (weight, row, output) order.
      const std::vector<double>& ordered = bound;
      on_every_device(what, run, [&](const auto& want, const auto& got, const std::string& label) {
        expect_within(want, got, ordered, label);
      });
      // The oracle itself against the exact product (+ bias).
      std::vector<float> y = run(*devices().scalar);
      std::vector<float> exact;
      for (const HostWeight* h : {&a, &b})
        for (int64_t t = 0; t < T; ++t)
          for (int64_t o = 0; o < h->w.rows; ++o) {
            double acc = 0;
            for (int64_t c = 0; c < s.cols; ++c) acc += h->at(o, c) * x[size_t(t * ld + c + off)];
            if (!h->bias.empty()) acc += h->bias[size_t(o)];
            exact.push_back(float(acc));
          }
      expect_within(exact, y, ordered, what + " scalar vs the exact product");
    }
  }
}

TEST(BackendOps, EmbedRmsnormAndElementwise) {
  Rand r(test_seed() + 1);
  const int64_t T = 5, H = 48, V = 31;
  HostWeight table = random_weight(WeightType::BF16, V, H, r);
  HostWeight table32 = random_weight(WeightType::F32, V, H, r);
  const std::vector<int32_t> ids = {3, 0, 30, 3, 17};
  const std::vector<float> x = r.normals(T * H, 2.0f), y = r.normals(T * H), g = r.normals(T * H, 3.0f);
  std::vector<float> u = r.normals(T * H, 4.0f);
  u[0] = 9.0f;  // beyond gpt-oss's clamp
  std::vector<float> gg = g;
  gg[1] = 8.5f;
  const std::vector<float> w = r.normals(H), wg = r.normals(8), v = r.normals(H);
  auto one = [&](const std::string& what, const std::function<void(Device&, Buf)>& op, int64_t rows, int64_t cols) {
    on_every_device(what, [&](Device& d) {
      Out o = make_out(d, BufType::F32, rows, cols);
      op(d, o.view);
      return check(d, o, what);
    });
  };
  one("embed/bf16", [&](Device& d, Buf o) { d.embed(d.keep(table.w), ids, o); }, T, H);
  one("embed/f32", [&](Device& d, Buf o) { d.embed(d.keep(table32.w), ids, o); }, T, H);
  auto norm = [&](const std::string& what, const std::function<void(Device&, Buf)>& op, int64_t group) {
    on_every_device_rows(what, [&](Device& d) {
      Out o = make_out(d, BufType::F32, T, H);
      op(d, o.view);
      return check(d, o, what);
    }, [&](const std::vector<float>& want) { return rmsnorm_bound(want, group); });
  };
  norm("rmsnorm/row", [&](Device& d, Buf o) {
    In xi = upload(d, x, T, H);
    d.rmsnorm(xi.buf(), d.keep(w), 1e-5f, o);
  }, H);
  norm("rmsnorm/groups of 8", [&](Device& d, Buf o) {
    In xi = upload(d, x, T, H);
    d.rmsnorm(xi.buf(), d.keep(wg), 1e-6f, o, 8);
  }, 8);
  norm("rmsnorm/no weight, in place", [&](Device& d, Buf o) {
    d.upload(o, x.data());
    d.rmsnorm(o, Vec{}, 1e-5f, o);
  }, H);
  one("add", [&](Device& d, Buf o) {
    In xi = upload(d, x, T, H);
    d.upload(o, y.data());
    d.add(o, xi.buf());
  }, T, H);
  one("sum", [&](Device& d, Buf o) {
    In xi = upload(d, x, T, H), yi = upload(d, y, T, H);
    d.sum(o, xi.buf(), yi.buf());
  }, T, H);
  one("mul_sigmoid", [&](Device& d, Buf o) {
    In gi = upload(d, g, T, H);
    d.upload(o, x.data());
    d.mul_sigmoid(o, gi.buf());
  }, T, H);
  const Activation acts[] = {{.kind = ActKind::SiLU},
                             {.kind = ActKind::SiTU, .beta_gate = 4.0f, .beta_up = 25.0f},
                             {.kind = ActKind::ClampedSwiGLU, .alpha = 1.702f, .limit = 7.0f}};
  const char* names[] = {"gated_act/silu", "gated_act/situ", "gated_act/clamped swiglu"};
  for (int i = 0; i < 3; ++i)
    one(names[i], [&](Device& d, Buf o) {
      In ui = upload(d, u, T, H);
      d.upload(o, gg.data());
      d.gated_act(acts[i], o, ui.buf());
    }, T, H);
  one("row_dot", [&](Device& d, Buf o) {
    In xi = upload(d, x, T, H);
    d.row_dot(xi.buf(), d.keep(v), o);
  }, T, 1);
  // gpt-oss's clamped SwiGLU from its definition.
  {
    Device& d = *devices().scalar;
    Out o = make_out(d, BufType::F32, T, H);
    In ui = upload(d, u, T, H);
    d.upload(o.view, gg.data());
    d.gated_act(acts[2], o.view, ui.buf());
    const std::vector<float> got = check(d, o, "clamped swiglu");
    for (size_t i = 0; i < got.size(); ++i) {
      const double gc = std::min(double(gg[i]), 7.0), uc = std::clamp(double(u[i]), -7.0, 7.0);
      const double want = (uc + 1) * gc / (1 + std::exp(-1.702 * gc));
      ASSERT_NEAR(got[i], want, 1e-5 * (1 + std::fabs(want))) << i;
    }
  }
  // Each row alone equals its row of the batch (rmsnorm, the activations, attn_res's parent ops).
  for (auto& d : devices().all) {
    In xi = upload(*d, x, T, H);
    const Vec wv = d->keep(w);
    Out all = make_out(*d, BufType::F32, T, H);
    d->rmsnorm(xi.buf(), wv, 1e-5f, all.view);
    const std::vector<float> a = check(*d, all, "rmsnorm");
    for (int64_t t = 0; t < T; ++t) {
      Out o1 = make_out(*d, BufType::F32, 1, H);
      d->rmsnorm(xi.buf().rows_view(t, 1), wv, 1e-5f, o1.view);
      expect_identical(std::vector<float>(a.begin() + t * H, a.begin() + (t + 1) * H), check(*d, o1, "rmsnorm row"),
                       "rmsnorm row alone on " + d->name());
    }
  }
}

TEST(BackendOps, AttnResMixing) {
  Rand r(test_seed() + 2);
  for (int n = 1; n <= 5; ++n) {
    const int64_t T = 3, H = n == 5 ? 7168 : 40;
    std::vector<std::vector<float>> src;
    for (int i = 0; i < n; ++i) src.push_back(r.normals(T * H, float(1 + i)));
    const std::vector<float> norm = r.normals(H), proj = r.normals(H, 0.2f);
    const std::string what = "attn_res/" + std::to_string(n) + " sources H=" + std::to_string(H);
    // A GPU ISA's sums in another order move source i's logit z_i = acc_i·r_i (acc_i = Σ_d np_d·v_id,
    // r_i = 1/√(Σ_d v_id²/H + eps)) by rounding errors that add up like a random walk: about
    // √H·2^-24 of the terms' magnitudes S_i = Σ_d |np_d·v_id| (times r_i) and of |z_i|; four times
    // that bounds it here. A softmax weight then moves by at most 2·max Δz of itself, so an output
    // Σ_i p_i·v_id by 2·max Δz·Σ_i p_i·|v_id| (plus the mix's own n roundings). A wrong weight,
    // source or scale is off by O(Σ_i p_i·|v_id|); the observed errors are ~1e-3 of this bound.
    auto bound = [&](const std::vector<float>&) {
      std::vector<double> b(size_t(T * H));
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> z(static_cast<size_t>(n)), dz(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) {
          double S = 0, acc = 0, ss = 0;
          for (int64_t d = 0; d < H; ++d) {
            const double v = src[size_t(i)][size_t(t * H + d)], np = double(norm[size_t(d)]) * double(proj[size_t(d)]);
            S += std::fabs(np * v);
            acc += np * v;
            ss += v * v;
          }
          const double r = 1.0 / std::sqrt(ss / double(H) + 1e-5);
          z[size_t(i)] = acc * r;
          dz[size_t(i)] = 4.0 * std::sqrt(double(H)) * 0x1p-24 * (S * r + std::fabs(acc * r));
        }
        const double zmax = *std::max_element(z.begin(), z.end()), worst = *std::max_element(dz.begin(), dz.end());
        std::vector<double> p(static_cast<size_t>(n));
        double sum = 0;
        for (int i = 0; i < n; ++i) sum += (p[size_t(i)] = std::exp(z[size_t(i)] - zmax));
        for (double& pi : p) pi /= sum;
        for (int64_t d = 0; d < H; ++d) {
          double m = 0;
          for (int i = 0; i < n; ++i) m += p[size_t(i)] * std::fabs(double(src[size_t(i)][size_t(t * H + d)]));
          b[size_t(t * H + d)] = (2.0 * worst + 4.0 * n * 0x1p-24) * m + 1e-30;
        }
      }
      return b;
    };
    on_every_device_rows(what, [&](Device& d) {
      std::vector<In> ins;
      std::vector<Buf> bufs;
      for (const auto& s : src) ins.push_back(upload(d, s, T, H));
      for (const auto& i : ins) bufs.push_back(i.buf());
      Out o = make_out(d, BufType::F32, T, H);
      d.attn_res(bufs, d.keep(norm), d.keep(proj), 1e-5f, o.view);
      std::vector<float> all = check(d, o, what);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<Buf> rows;
        for (const Buf& b : bufs) rows.push_back(b.rows_view(t, 1));
        Out o1 = make_out(d, BufType::F32, 1, H);
        d.attn_res(rows, d.keep(norm), d.keep(proj), 1e-5f, o1.view);
        expect_identical(std::vector<float>(all.begin() + t * H, all.begin() + (t + 1) * H), check(d, o1, what),
                         what + " row alone on " + d.name());
      }
      return all;
    }, bound);
  }
}

struct KdaCase {
  int64_t heads, dk, K;
  bool lower_bound;
};

TEST(BackendOps, KdaForwardReplayAndTheTwoStateCopies) {
  Rand r(test_seed() + 3);
  for (const KdaCase& kc : {KdaCase{3, 8, 4, false}, KdaCase{2, 16, 3, true}, KdaCase{96, 128, 4, true}}) {
    const int64_t P = kc.heads * kc.dk, T = kc.heads == 96 ? 2 : 5, win = 3 * P * (kc.K - 1);
    const std::vector<float> q = r.normals(T * P), k = r.normals(T * P), v = r.normals(T * P), f = r.normals(T * P),
                             beta = r.normals(T * kc.heads), gate = r.normals(T * P);
    const std::vector<float> qc = r.normals(P * kc.K, 0.5f), kcv = r.normals(P * kc.K, 0.5f), vc = r.normals(P * kc.K, 0.5f);
    const std::vector<float> dt = r.normals(P, 0.5f), onorm = r.normals(kc.dk);
    std::vector<float> alog;
    for (int64_t h = 0; h < kc.heads; ++h) alog.push_back(std::log(1.0f + float(r.uniform(1, 15))));
    const std::vector<float> conv0 = r.normals(win, 0.3f), S0 = r.normals(kc.heads * kc.dk * kc.dk, 0.1f);
    const std::string what = "kda/" + std::to_string(kc.heads) + "x" + std::to_string(kc.dk) + " K=" +
                             std::to_string(kc.K) + (kc.lower_bound ? " lower bound" : " softplus");
    auto make_op = [&](Device& d) {
      KdaOp op{.heads = kc.heads, .head_dim = kc.dk, .conv_kernel = kc.K, .norm_eps = 1e-5f,
               .lower_bound_gate = kc.lower_bound, .lower_bound = -5.0f};
      op.q_conv = d.keep(qc);
      op.k_conv = d.keep(kcv);
      op.v_conv = d.keep(vc);
      op.dt_bias = d.keep(dt);
      op.a_log = d.keep(alog);
      op.o_norm = d.keep(onorm);
      return op;
    };
    on_every_device(what, [&](Device& d) {
      const KdaOp op = make_op(d);
      In qi = upload(d, q, T, P), ki = upload(d, k, T, P), vi = upload(d, v, T, P), fi = upload(d, f, T, P),
         bi = upload(d, beta, T, kc.heads), gi = upload(d, gate, T, P);
      auto inputs = [&](int64_t t0, int64_t n) {
        return KdaInputs{qi.buf().rows_view(t0, n), ki.buf().rows_view(t0, n), vi.buf().rows_view(t0, n),
                         fi.buf().rows_view(t0, n), bi.buf().rows_view(t0, n), gi.buf().rows_view(t0, n)};
      };
      auto new_state = [&] {
        KdaState s{d.alloc(BufType::F32, 3, P * (kc.K - 1)), d.alloc(BufType::F32, kc.heads, kc.dk * kc.dk)};
        d.upload(s.conv, conv0.data());
        d.upload(s.S, S0.data());
        return s;
      };
      auto free_state = [&](KdaState& s) {
        d.free(s.conv);
        d.free(s.S);
      };
      // (a) all T rows in place, recording.
      KdaState a = new_state();
      DeviceBuffer raw(d, BufType::F32, T, 3 * P), rk(d, BufType::F32, T, P), rv(d, BufType::F32, T, P),
          rg(d, BufType::F32, T, P), rb(d, BufType::F32, T, kc.heads);
      const KdaRecord rec{raw.buf(), rk.buf(), rv.buf(), rg.buf(), rb.buf()};
      Out oa = make_out(d, BufType::F32, T, P);
      Out body = make_out(d, BufType::F32, T, P);  // kda wants a contiguous output: copy it into a guarded one
      {
        DeviceBuffer o(d, BufType::F32, T, P);
        d.fill(o.buf(), kPoison);
        d.kda(op, inputs(0, T), a, a, &rec, o.buf());
        d.copy(oa.view, o.buf());
      }
      std::vector<float> out = check(d, oa, what);
      std::vector<float> state = read(d, a.conv), s_a = read(d, a.S);
      state.insert(state.end(), s_a.begin(), s_a.end());
      // (b) one row at a time carries the state to the same bits.
      KdaState b = new_state();
      for (int64_t t = 0; t < T; ++t) {
        DeviceBuffer o(d, BufType::F32, 1, P);
        d.kda(op, inputs(t, 1), b, b, nullptr, o.buf());
        const std::vector<float> row = read(d, o.buf());
        expect_identical(std::vector<float>(out.begin() + t * P, out.begin() + (t + 1) * P), row,
                         what + " row " + std::to_string(t) + " alone on " + d.name());
      }
      expect_identical(state, [&] {
        std::vector<float> s = read(d, b.conv), sb = read(d, b.S);
        s.insert(s.end(), sb.begin(), sb.end());
        return s;
      }(), what + " state after one-row calls on " + d.name());
      // (c) from != to: the same output and result, and `from` untouched.
      KdaState from = new_state(), to = new_state();
      d.fill(to.S, kPoison);
      d.fill(to.conv, kPoison);
      {
        DeviceBuffer o(d, BufType::F32, T, P);
        d.kda(op, inputs(0, T), from, to, nullptr, o.buf());
        expect_identical(out, read(d, o.buf()), what + " into a second copy on " + d.name());
      }
      std::vector<float> s_to = read(d, to.conv), s_to2 = read(d, to.S);
      s_to.insert(s_to.end(), s_to2.begin(), s_to2.end());
      expect_identical(state, s_to, what + " second copy's state on " + d.name());
      std::vector<float> s_from = read(d, from.conv), s_from2 = read(d, from.S);
      s_from.insert(s_from.end(), s_from2.begin(), s_from2.end());
      std::vector<float> s0 = conv0;
      s0.insert(s0.end(), S0.begin(), S0.end());
      expect_identical(s0, s_from, what + " leaves the first copy as it was on " + d.name());
      // (d) replaying n recorded rows onto the old state equals running n rows.
      for (int64_t n : {int64_t(0), int64_t(1), T - 1}) {
        KdaState rp = new_state(), run = new_state();
        d.kda_replay(op, rp, rec, n);
        if (n > 0) {
          DeviceBuffer o(d, BufType::F32, n, P);
          d.kda(op, inputs(0, n), run, run, nullptr, o.buf());
        }
        for (auto [x, y] : {std::pair{rp.conv, run.conv}, std::pair{rp.S, run.S}})
          expect_identical(read(d, y), read(d, x), what + " replay of " + std::to_string(n) + " rows on " + d.name());
        free_state(rp);
        free_state(run);
      }
      free_state(a);
      free_state(b);
      free_state(from);
      free_state(to);
      std::vector<float> all = out;
      all.insert(all.end(), state.begin(), state.end());
      return all;
    });
  }
}

TEST(BackendOps, MlaCacheAndAbsorbedAttention) {
  Rand r(test_seed() + 4);
  struct Shape {
    int64_t heads, nope, rope, vd, kvr;
    WeightType kvb;
    bool causal;
  };
  for (const Shape& s : {Shape{3, 8, 4, 8, 16, WeightType::BF16, true}, Shape{2, 8, 0, 6, 12, WeightType::F32, true},
                         Shape{4, 16, 8, 16, 32, WeightType::BF16, false}, Shape{96, 128, 64, 128, 512, WeightType::BF16, true}}) {
    const int64_t T = s.heads == 96 ? 2 : 4, base = 5, cap = base + T + 3, qk = s.nope + s.rope;
    HostWeight kvb = random_weight(s.kvb, s.heads * (s.nope + s.vd), s.kvr, r);
    const std::vector<float> kv_old = r.normals(base * (s.kvr + s.rope)), kv = r.normals(T * (s.kvr + s.rope)),
                             norm = r.normals(s.kvr), q = r.normals(T * s.heads * qk);
    const std::string what = "mla/" + std::to_string(s.heads) + " heads kvr " + std::to_string(s.kvr) + " rope " +
                             std::to_string(s.rope) + (s.causal ? " causal" : " block");
    on_every_device(what, [&](Device& d) {
      DeviceBuffer lat(d, BufType::F32, cap, s.kvr), kpe(d, BufType::F32, cap, s.rope);
      const Buf kpe_b = kpe.buf();
      In kvo = upload(d, kv_old, base, s.kvr + s.rope), kvi = upload(d, kv, T, s.kvr + s.rope), qi = upload(d, q, T, s.heads * qk);
      const Vec nv = d.keep(norm);
      d.mla_cache_write(kvo.buf(), nv, 1e-6f, lat.buf(), kpe_b, 0);
      d.mla_cache_write(kvi.buf(), nv, 1e-6f, lat.buf(), kpe_b, base);
      const Weight kw = d.keep(kvb.w);
      const MlaOp op{.heads = s.heads, .nope = s.nope, .rope = s.rope, .v_dim = s.vd, .kv_rank = s.kvr,
                     .scale = 1.0f / std::sqrt(float(qk)), .causal = s.causal, .kv_b = &kw};
      const int64_t visible0 = s.causal ? base + 1 : base + T;
      DeviceBuffer o(d, BufType::F32, T, s.heads * s.vd);
      d.fill(o.buf(), kPoison);
      d.mla_attention(op, qi.buf(), lat.buf(), kpe_b, visible0, o.buf());
      std::vector<float> out = read(d, o.buf());
      for (float x : out) EXPECT_NE(bits(x), bits(kPoison)) << what << " left an output unwritten";
      if (s.causal)
        for (int64_t t = 0; t < T; ++t) {
          DeviceBuffer o1(d, BufType::F32, 1, s.heads * s.vd);
          d.mla_attention(op, qi.buf().rows_view(t, 1), lat.buf(), kpe_b, visible0 + t, o1.buf());
          expect_identical(std::vector<float>(out.begin() + t * s.heads * s.vd, out.begin() + (t + 1) * s.heads * s.vd),
                           read(d, o1.buf()), what + " row alone on " + d.name());
        }
      std::vector<float> all = read(d, lat.buf().rows_view(0, base + T));
      if (s.rope) {
        const std::vector<float> pe = read(d, kpe_b.rows_view(0, base + T));
        all.insert(all.end(), pe.begin(), pe.end());
      }
      all.insert(all.end(), out.begin(), out.end());
      return all;
    });
  }
}

// Absorbed MLA in the order the scalar oracle claims (mla_attention's comment), written as the
// plain loops: per head and row the absorbed query in i order, each score dot left to right with
// its products rounded before the sums, the softmax of ops.cpp, the context in position order,
// the value expansion left to right. The device's tiled kernel must give these bits for every
// row, at any T (partial tiles), causal or not, with and without rope.
std::vector<float> mla_in_scalar_order(const std::vector<float>& q, const std::vector<float>& lat,
                                       const std::vector<float>& kpe, const HostWeight& kvb, int64_t T, int64_t nh,
                                       int64_t nope, int64_t rope, int64_t vd, int64_t kvr, float scale, bool causal,
                                       int64_t visible0) {
  volatile float keep;  // forces each product to round on its own (no contraction into an fma)
  auto mul = [&](float a, float b) {
    keep = a * b;
    return float(keep);
  };
  auto w = [&](int64_t r, int64_t c) { return float(kvb.at(r, c)); };
  std::vector<float> out(size_t(T * nh * vd));
  const int64_t qk = nope + rope;
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t t = 0; t < T; ++t) {
      const float* qh = q.data() + (t * nh + h) * qk;
      const int64_t k0 = h * (nope + vd), v0 = k0 + nope, n = visible0 + (causal ? t : 0);
      std::vector<float> qabs(static_cast<size_t>(kvr), 0.0f), sc(static_cast<size_t>(n)), ctx(static_cast<size_t>(kvr), 0.0f);
      for (int64_t i = 0; i < nope; ++i)
        for (int64_t j = 0; j < kvr; ++j) qabs[size_t(j)] += mul(qh[i], w(k0 + i, j));
      for (int64_t p = 0; p < n; ++p) {
        float a = 0.0f, b = 0.0f;
        for (int64_t i = 0; i < kvr; ++i) a += mul(qabs[size_t(i)], lat[size_t(p * kvr + i)]);
        for (int64_t i = 0; i < rope; ++i) b += mul(qh[nope + i], kpe[size_t(p * rope + i)]);
        sc[size_t(p)] = mul(a + b, scale);
      }
      float m = sc[0], sum = 0.0f;
      for (int64_t p = 1; p < n; ++p) m = sc[size_t(p)] > m ? sc[size_t(p)] : m;
      for (int64_t p = 0; p < n; ++p) {
        sc[size_t(p)] = mathf::exp(sc[size_t(p)] - m);
        sum += sc[size_t(p)];
      }
      const float inv = 1.0f / sum;
      for (int64_t p = 0; p < n; ++p) sc[size_t(p)] = mul(sc[size_t(p)], inv);
      for (int64_t p = 0; p < n; ++p)
        for (int64_t j = 0; j < kvr; ++j) ctx[size_t(j)] += mul(sc[size_t(p)], lat[size_t(p * kvr + j)]);
      for (int64_t j = 0; j < vd; ++j) {
        float acc = 0.0f;
        for (int64_t i = 0; i < kvr; ++i) acc += mul(w(v0 + j, i), ctx[size_t(i)]);
        out[size_t((t * nh + h) * vd + j)] = acc;
      }
    }
  return out;
}

TEST(BackendOps, MlaTilesGiveTheScalarLoopsBits) {
  Rand r(test_seed() + 14);
  struct Shape {
    int64_t heads, nope, rope, vd, kvr, T, base;
    WeightType kvb;
    bool causal;
    float sharp = 1.0f;  // > 1: scores spread past exp's range (underflow, the lane-by-lane path)
  };
  for (const Shape& s : {Shape{3, 8, 4, 8, 16, 37, 5, WeightType::BF16, true}, Shape{2, 8, 0, 6, 12, 17, 0, WeightType::F32, true},
                         Shape{2, 16, 8, 16, 40, 33, 70, WeightType::BF16, false},
                         Shape{1, 4, 2, 4, 8, 300, 1, WeightType::F32, true},
                         Shape{2, 8, 4, 8, 64, 45, 20, WeightType::BF16, true, 40.0f},
                         // One row (decode: 8 positions and 8 outputs side by side, then tails).
                         Shape{4, 8, 4, 6, 20, 1, 21, WeightType::BF16, true}, Shape{2, 8, 4, 8, 16, 1, 9, WeightType::F32, false},
                         Shape{1, 4, 2, 12, 8, 1, 300, WeightType::F32, true, 40.0f},
                         // FP8 kv_b (DeepSeek-V3's release) on devices that read it: two row blocks, a
                         // partial column block, one row and a tile.
                         Shape{3, 32, 8, 32, 200, 1, 21, WeightType::FP8_E4M3, true},
                         Shape{3, 32, 8, 32, 200, 19, 5, WeightType::FP8_E4M3, true}}) {
    const int64_t qk = s.nope + s.rope, cap = s.base + s.T;
    const std::vector<float> lat = r.normals(cap * s.kvr), kpe = r.normals(cap * s.rope), q = r.normals(s.T * s.heads * qk);
    HostWeight kvb = random_weight(s.kvb, s.heads * (s.nope + s.vd), s.kvr, r);
    const float scale = s.sharp / std::sqrt(float(qk));
    const int64_t visible0 = s.causal ? s.base + 1 : s.base + s.T;
    const std::string what = "mla T " + std::to_string(s.T) + " kvr " + std::to_string(s.kvr) + " rope " +
                             std::to_string(s.rope) + (s.causal ? " causal" : " block");
    const std::vector<float> want = mla_in_scalar_order(q, lat, kpe, kvb, s.T, s.heads, s.nope, s.rope, s.vd, s.kvr,
                                                        scale, s.causal, visible0);
    for (auto& dev : devices().all) {
      Device& d = *dev;
      if (s.kvb == WeightType::FP8_E4M3 && !d.mla_reads_fp8()) continue;  // the model widens it for them
      In li = upload(d, lat, cap, s.kvr), qi = upload(d, q, s.T, s.heads * qk);
      DeviceBuffer pe(d, BufType::F32, cap, s.rope);
      if (s.rope) d.upload(pe.buf(), kpe.data());
      Weight kw = d.keep(kvb.w);
      // FP8: as given (the table decode) and marked free of NaN codes as a loader marks it (the
      // arithmetic decode); the same bits either way.
      for (bool finite : {false, true}) {
        if (finite && kvb.w.type != WeightType::FP8_E4M3) continue;
        if (finite) {
          ASSERT_FALSE(fp8_has_nan_code(static_cast<const uint8_t*>(kvb.w.data), size_t(kvb.w.rows * kvb.w.cols)));
        }
        kw.fp8_finite = finite;
        const MlaOp op{.heads = s.heads, .nope = s.nope, .rope = s.rope, .v_dim = s.vd, .kv_rank = s.kvr,
                       .scale = scale, .causal = s.causal, .kv_b = &kw};
        DeviceBuffer o(d, BufType::F32, s.T, s.heads * s.vd);
        d.fill(o.buf(), kPoison);
        d.mla_attention(op, qi.buf(), li.buf(), pe.buf(), visible0, o.buf());
        expect_identical(want, read(d, o.buf()), what + (finite ? " marked finite" : "") + " on " + d.name());
      }
    }
  }
}

// Softmax attention in double from its definition, with an optional sink logit and window.
std::vector<double> naive_gqa(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              int64_t T, int64_t nh, int64_t nkv, int64_t D, int64_t visible0, int64_t window,
                              const std::vector<float>& sinks) {
  std::vector<double> out(size_t(T * nh * D));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t n = visible0 + t, p0 = window > 0 ? std::max<int64_t>(0, n - window) : 0, kvh = h / (nh / nkv);
      std::vector<double> sc;
      double m = sinks.empty() ? -1e300 : sinks[size_t(h)];
      for (int64_t p = p0; p < n; ++p) {
        double a = 0;
        for (int64_t i = 0; i < D; ++i) a += double(q[size_t(t * nh * D + h * D + i)]) * k[size_t(p * nkv * D + kvh * D + i)];
        sc.push_back(a / std::sqrt(double(D)));
        m = std::max(m, sc.back());
      }
      double z = sinks.empty() ? 0 : std::exp(sinks[size_t(h)] - m);
      for (double& x : sc) z += (x = std::exp(x - m));
      for (int64_t p = p0; p < n; ++p)
        for (int64_t i = 0; i < D; ++i)
          out[size_t(t * nh * D + h * D + i)] += sc[size_t(p - p0)] / z * v[size_t(p * nkv * D + kvh * D + i)];
    }
  return out;
}

TEST(BackendOps, GqaAttentionWindowsAndSinks) {
  Rand r(test_seed() + 5);
  struct Shape {
    int64_t nh, nkv, D, window;
    bool sinks;
  };
  for (const Shape& s : {Shape{4, 2, 8, 0, false}, Shape{8, 2, 16, 3, false}, Shape{4, 1, 8, 0, true}, Shape{6, 3, 8, 4, true}}) {
    const int64_t T = 5, base = 6, cap = base + T + 2, qd = s.nh * s.D, kvd = s.nkv * s.D;
    const std::vector<float> q = r.normals(T * qd), k = r.normals(cap * kvd), v = r.normals(cap * kvd);
    const std::vector<float> sinks = s.sinks ? r.normals(s.nh, 2.0f) : std::vector<float>{};
    const std::string what = "gqa/" + std::to_string(s.nh) + ":" + std::to_string(s.nkv) + " window " +
                             std::to_string(s.window) + (s.sinks ? " sinks" : "");
    const GqaOp op0{.heads = s.nh, .kv_heads = s.nkv, .head_dim = s.D, .scale = 1.0f / std::sqrt(float(s.D)),
                    .window = s.window};
    on_every_device(what, [&](Device& d) {
      GqaOp op = op0;
      if (s.sinks) op.sinks = d.keep(sinks);
      In qi = upload(d, q, T, qd), ki = upload(d, k, cap, kvd), vi = upload(d, v, cap, kvd);
      DeviceBuffer o(d, BufType::F32, T, qd);
      d.fill(o.buf(), kPoison);
      d.gqa_attention(op, qi.buf(), ki.buf(), vi.buf(), base + 1, o.buf());
      const std::vector<float> out = read(d, o.buf());
      for (int64_t t = 0; t < T; ++t) {
        DeviceBuffer o1(d, BufType::F32, 1, qd);
        d.gqa_attention(op, qi.buf().rows_view(t, 1), ki.buf(), vi.buf(), base + 1 + t, o1.buf());
        expect_identical(std::vector<float>(out.begin() + t * qd, out.begin() + (t + 1) * qd), read(d, o1.buf()),
                         what + " row alone on " + d.name());
      }
      return out;
    });
    // The oracle against attention from its definition.
    Device& d = *devices().scalar;
    GqaOp op = op0;
    if (s.sinks) op.sinks = d.keep(sinks);
    In qi = upload(d, q, T, qd), ki = upload(d, k, cap, kvd), vi = upload(d, v, cap, kvd);
    DeviceBuffer o(d, BufType::F32, T, qd);
    d.gqa_attention(op, qi.buf(), ki.buf(), vi.buf(), base + 1, o.buf());
    const std::vector<float> got = read(d, o.buf());
    const std::vector<double> want = naive_gqa(q, k, v, T, s.nh, s.nkv, s.D, base + 1, s.window, sinks);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << what << " " << i;
  }
}

TEST(BackendOps, RopeTablesAndRotations) {
  Rand r(test_seed() + 6);
  for (bool f64 : {false, true})
    for (RopePairs pairs : {RopePairs::Half, RopePairs::Interleaved}) {
      const int64_t T = 4, heads = 3, stride = 20, offset = 4, dim = 8;
      RopeSpec spec;
      for (int64_t i = 0; i < dim / 2; ++i) spec.inv_freq.push_back(std::pow(10000.0, -2.0 * double(i) / double(dim)));
      spec.f64_angles = f64;
      spec.magnitude = f64 ? 1.25f : 1.0f;
      const std::vector<float> x = r.normals(T * heads * stride);
      const std::string what = std::string("rope/") + (pairs == RopePairs::Half ? "half" : "interleaved") +
                               (f64 ? " f64 angles, magnitude 1.25" : " f32 angles");
      on_every_device(what, [&](Device& d) {
        Out table = make_out(d, BufType::F32, T, dim);
        d.rope_table(spec, 1000, table.view);
        std::vector<float> tab = check(d, table, what + " table");
        In xi = upload(d, x, T, heads * stride);
        In tb = upload(d, tab, T, dim);
        d.rope(tb.buf(), pairs, xi.buf(), heads, stride, offset, dim);
        std::vector<float> out = read(d, xi.buf());
        // Columns outside the rotated part stay as they were.
        for (int64_t t = 0; t < T; ++t)
          for (int64_t c = 0; c < heads * stride; ++c) {
            const int64_t in_head = c % stride;
            if (in_head < offset || in_head >= offset + dim) {
              EXPECT_EQ(bits(out[size_t(t * heads * stride + c)]), bits(x[size_t(t * heads * stride + c)])) << what;
            }
          }
        out.insert(out.end(), tab.begin(), tab.end());
        return out;
      });
    }
}

// Top-k from its definition: sort by (choice desc, id asc).
std::vector<int32_t> naive_topk(std::vector<float> choice, int64_t k) {
  std::vector<int32_t> ids(choice.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return choice[a] > choice[b] || (choice[a] == choice[b] && a < b); });
  ids.resize(size_t(k));
  return ids;
}

TEST(BackendOps, RouterEveryScoring) {
  Rand r(test_seed() + 7);
  struct Shape {
    RouterScore score;
    int64_t E, k, groups, topk_groups;
    bool bias, renorm;
  };
  for (const Shape& s : {Shape{RouterScore::Sigmoid, 16, 4, 1, 1, true, true}, Shape{RouterScore::Sigmoid, 24, 4, 4, 2, true, true},
                         Shape{RouterScore::Sigmoid, 896, 16, 1, 1, true, true}, Shape{RouterScore::Softmax, 64, 8, 1, 1, false, true},
                         Shape{RouterScore::Softmax, 64, 8, 1, 1, false, false}, Shape{RouterScore::TopkSoftmax, 32, 4, 1, 1, false, false}}) {
    const int64_t T = 6;
    std::vector<float> logits = r.normals(T * s.E);
    // Ties: row 0's top choices are equal logits (every third expert), so the lower id must win.
    for (int64_t e = 0; e < s.E; e += 3) logits[size_t(e)] = 4.0f;
    const std::vector<float> bias = r.normals(s.E, 0.05f);
    const std::string what = std::string("route/") +
                             (s.score == RouterScore::Sigmoid ? "sigmoid" : s.score == RouterScore::Softmax ? "softmax" : "topk-softmax") +
                             " E=" + std::to_string(s.E) + " k=" + std::to_string(s.k) + " groups " + std::to_string(s.groups) +
                             (s.renorm ? " renorm" : "");
    auto make_op = [&](Device& d) {
      RouterOp op{.score = s.score, .experts = s.E, .top_k = s.k, .groups = s.groups, .topk_groups = s.topk_groups,
                  .renormalize = s.renorm, .renorm_eps = s.score == RouterScore::Sigmoid ? 1e-20f : 0.0f,
                  .scaling = s.score == RouterScore::Sigmoid ? 2.5f : 1.0f};
      if (s.bias) op.correction_bias = d.keep(bias);
      return op;
    };
    on_every_device(what, [&](Device& d) {
      const RouterOp op = make_op(d);
      In li = upload(d, logits, T, s.E);
      Out ids = make_out(d, BufType::I32, T, s.k), w = make_out(d, BufType::F32, T, s.k);
      d.route(op, li.buf(), ids.view, w.view);
      std::vector<float> out = check(d, ids, what + " ids");
      const std::vector<float> ws = check(d, w, what + " weights");
      for (int64_t t = 0; t < T; ++t) {
        Out i1 = make_out(d, BufType::I32, 1, s.k), w1 = make_out(d, BufType::F32, 1, s.k);
        d.route(op, li.buf().rows_view(t, 1), i1.view, w1.view);
        expect_identical(std::vector<float>(out.begin() + t * s.k, out.begin() + (t + 1) * s.k), check(d, i1, what),
                         what + " ids of a row alone on " + d.name());
        expect_identical(std::vector<float>(ws.begin() + t * s.k, ws.begin() + (t + 1) * s.k), check(d, w1, what),
                         what + " weights of a row alone on " + d.name());
      }
      out.insert(out.end(), ws.begin(), ws.end());
      return out;
    });
    if (s.groups > 1) continue;  // the naive reference below has no groups
    Device& d = *devices().scalar;
    const RouterOp op = make_op(d);
    In li = upload(d, logits, T, s.E);
    Out ids = make_out(d, BufType::I32, T, s.k), w = make_out(d, BufType::F32, T, s.k);
    d.route(op, li.buf(), ids.view, w.view);
    const std::vector<float> got = check(d, ids, what);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<float> choice(logits.begin() + t * s.E, logits.begin() + (t + 1) * s.E);
      if (s.score == RouterScore::Sigmoid)
        for (int64_t e = 0; e < s.E; ++e) choice[size_t(e)] = 1.0f / (1.0f + std::exp(-choice[size_t(e)])) + bias[size_t(e)];
      // softmax is monotonic: the top-k of the logits is the top-k of the softmax (ties aside).
      const std::vector<int32_t> want = naive_topk(choice, s.k);
      for (int64_t i = 0; i < s.k; ++i) {
        int32_t g;
        std::memcpy(&g, &got[size_t(t * s.k + i)], 4);
        EXPECT_EQ(g, want[size_t(i)]) << what << " row " << t << " slot " << i;
      }
    }
  }
}

TEST(BackendOps, ExpertsAndCombine) {
  Rand r(test_seed() + 8);
  // Each format with the activation (and biases) of an architecture that ships it: K3's SiTU on
  // BF16 and F32, gpt-oss's clamped SwiGLU with BF16 biases on MXFP4, DeepSeek's SiLU on FP8 and
  // Kimi-K2-Thinking's on INT4.
  for (WeightType type :
       {WeightType::BF16, WeightType::MXFP4, WeightType::FP8_E4M3, WeightType::INT4_G32, WeightType::F32}) {
    const int64_t T = 5, k = 4, R = 64, I = 96, n_exp = 5;
    const bool bias = type == WeightType::MXFP4;
    std::vector<HostWeight> gate, up, down;
    for (int64_t e = 0; e < n_exp; ++e) {
      gate.push_back(random_weight(type, I, R, r, bias));
      up.push_back(random_weight(type, I, R, r, bias));
      down.push_back(random_weight(type, R, I, r, bias));
    }
    // Members: every (row, slot) to one expert; expert 3 gets none.
    std::vector<std::vector<int64_t>> members(static_cast<size_t>(n_exp));
    for (int64_t m = 0; m < T * k; ++m) {
      int64_t e = r.uniform(0, n_exp - 2);
      if (e == 3) e = 4;
      members[size_t(e)].push_back(m);
    }
    const std::vector<float> z = r.normals(T * R), weights = r.normals(T * k, 0.3f);
    const std::string what = std::string("experts+combine/") + weight_type_name(type);
    const bool silu = type == WeightType::FP8_E4M3 || type == WeightType::INT4_G32;
    const Activation act = type == WeightType::MXFP4 ? Activation{.kind = ActKind::ClampedSwiGLU}
                           : silu                    ? Activation{.kind = ActKind::SiLU}
                                                     : Activation{.kind = ActKind::SiTU, .beta_gate = 4.0f, .beta_up = 25.0f};
    auto run = [&](Device& d) {
      std::vector<ExpertView> views;
      for (int64_t e = 0; e < n_exp; ++e) views.push_back({d.keep(gate[size_t(e)].w), d.keep(up[size_t(e)].w), d.keep(down[size_t(e)].w), {}});
      std::vector<std::span<const int64_t>> spans;
      for (const auto& m : members) spans.push_back(m);
      In zi = upload(d, z, T, R), wi = upload(d, weights, T, k);
      Out yexp = make_out(d, BufType::F32, T * k, R);
      // In two calls (experts 0-1, then the rest): which experts share a call changes nothing.
      d.experts({.act = act, .top_k = k}, std::span(views).first(2), std::span(spans).first(2), zi.buf(), yexp.view);
      d.experts({.act = act, .top_k = k}, std::span(views).subspan(2), std::span(spans).subspan(2), zi.buf(), yexp.view);
      std::vector<float> ye = check(d, yexp, what + " expert outputs");
      Out out = make_out(d, BufType::F32, T, R);
      In ys = upload(d, ye, T * k, R);
      d.combine(ys.buf(), wi.buf(), out.view);
      std::vector<float> all = check(d, out, what + " combine");
      // One expert per call, in reverse order: the same bits.
      Out again = make_out(d, BufType::F32, T * k, R);
      for (int64_t e = n_exp - 1; e >= 0; --e)
        d.experts({.act = act, .top_k = k}, std::span(views).subspan(size_t(e), 1), std::span(spans).subspan(size_t(e), 1),
                  zi.buf(), again.view);
      expect_identical(ye, check(d, again, what), what + " experts one by one in reverse on " + d.name());
      // Row 0's slots alone (one member per expert: the decode shape): the same bits as in the
      // five-row call.
      std::vector<std::vector<int64_t>> row0(members.size());
      std::vector<std::span<const int64_t>> row0_spans;
      for (size_t e = 0; e < members.size(); ++e) {
        for (int64_t m : members[e])
          if (m < k) row0[e].push_back(m);
        row0_spans.push_back(row0[e]);
      }
      In z0 = upload(d, std::vector<float>(z.begin(), z.begin() + R), 1, R);
      Out one = make_out(d, BufType::F32, k, R);
      d.experts({.act = act, .top_k = k}, views, row0_spans, z0.buf(), one.view);
      expect_identical(std::vector<float>(ye.begin(), ye.begin() + k * R), check(d, one, what + " row 0"),
                       what + " row 0 alone vs in the five-row call on " + d.name());
      all.insert(all.end(), ye.begin(), ye.end());
      return all;
    };
    on_every_device(what, run, [&](const auto& want, const auto& got, const std::string& label) {
      // Three products and an activation per output: a relative bound on the largest output.
      double scale = 0;
      for (float x : want) scale = std::max(scale, std::fabs(double(x)));
      expect_within(want, got, std::vector<double>(want.size(), 1e-4 * scale), label);
    });
  }
}

// gpt-oss's experts: gate and up as one MXFP4 matrix with their rows interleaved (and a BF16 bias
// interleaved alike). Every device against the scalar CPU, and the scalar CPU against the same
// experts with the even and odd rows copied out into a separate gate and up: the same bits.
TEST(BackendOps, ExpertsWithInterleavedGateUp) {
  Rand r(test_seed() + 9);
  const int64_t T = 4, k = 2, R = 64, I = 32, n_exp = 3;
  std::vector<HostWeight> gate_up, down, gate, up;
  for (int64_t e = 0; e < n_exp; ++e) {
    gate_up.push_back(random_weight(WeightType::MXFP4, 2 * I, R, r, true));
    down.push_back(random_weight(WeightType::MXFP4, R, I, r, true));
    // The split copies: row i of gate is row 2i of gate_up, row i of up is row 2i + 1.
    for (int part = 0; part < 2; ++part) {
      const HostWeight& f = gate_up.back();
      HostWeight h;
      for (int64_t i = 0; i < I; ++i) {
        const int64_t row = 2 * i + part;
        h.bytes.insert(h.bytes.end(), f.bytes.begin() + row * R / 2, f.bytes.begin() + (row + 1) * R / 2);
        h.scale_bytes.insert(h.scale_bytes.end(), f.scale_bytes.begin() + row * R / 32,
                             f.scale_bytes.begin() + (row + 1) * R / 32);
        h.bias_bf16.push_back(f.bias_bf16[size_t(row)]);
      }
      h.w = Weight{.type = WeightType::MXFP4, .rows = I, .cols = R};
      (part == 0 ? gate : up).push_back(std::move(h));
    }
  }
  for (auto* v : {&gate, &up})
    for (HostWeight& h : *v) {
      h.w.data = h.bytes.data();
      h.w.scales = h.scale_bytes.data();
      h.w.bias = h.bias_bf16.data();
      h.w.bias_type = DType::BF16;
    }
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(n_exp));
  for (int64_t m = 0; m < T * k; ++m) members[size_t(m % n_exp)].push_back(m);
  const std::vector<float> z = r.normals(T * R);
  const Activation act{.kind = ActKind::ClampedSwiGLU, .alpha = 1.702f, .limit = 1.5f};  // a limit the values cross
  auto run_views = [&](Device& d, bool interleaved) {
    std::vector<ExpertView> views;
    for (int64_t e = 0; e < n_exp; ++e) {
      ExpertView v;
      if (interleaved) {
        v.gate = d.keep(gate_up[size_t(e)].w);
        v.gate_up_interleaved = true;
      } else {
        v.gate = d.keep(gate[size_t(e)].w);
        v.up = d.keep(up[size_t(e)].w);
      }
      v.down = d.keep(down[size_t(e)].w);
      views.push_back(v);
    }
    std::vector<std::span<const int64_t>> spans;
    for (const auto& m : members) spans.push_back(m);
    In zi = upload(d, z, T, R);
    Out yexp = make_out(d, BufType::F32, T * k, R);
    d.experts({.act = act, .top_k = k}, views, spans, zi.buf(), yexp.view);
    return check(d, yexp, std::string("interleaved experts on ") + d.name());
  };
  expect_identical(run_views(*devices().scalar, false), run_views(*devices().scalar, true),
                   "interleaved gate_up vs the same rows split, on the scalar CPU");
  on_every_device("experts/interleaved", [&](Device& d) { return run_views(d, true); },
                  [&](const auto& want, const auto& got, const std::string& label) {
                    double scale = 0;
                    for (float x : want) scale = std::max(scale, std::fabs(double(x)));
                    expect_within(want, got, std::vector<double>(want.size(), 1e-4 * scale), label);
                  });
}

}  // namespace
}  // namespace sluice::device

namespace sluice::device {
namespace {

// Device::flops() on the CPU counts each op's multiply-adds twice, by the formulas a FLOP floor
// uses: a product 2·rows·cols·n, GQA 4·head_dim per head and visible position (a sliding window
// counts only what it sees), the absorbed MLA per head 2·(nope + v_dim)·kv_rank per row plus
// 2·(2·kv_rank + rope) per visible position, causal or not (KDA's 7·dk² per row and head is not
// checked here).
TEST(BackendOps, CpuDeviceCountsTheFlopsOfProductsAndAttention) {
  Rand r(test_seed() + 11);
  auto d = open_device("cpu:scalar");
  ASSERT_EQ(d->flops(), 0u);
  HostWeight w = random_weight(WeightType::BF16, 5, 7, r);
  const Weight kw = d->keep(w.w);
  In x = upload(*d, r.normals(3 * 7), 3, 7);
  DeviceBuffer y(*d, BufType::F32, 3, 5);
  const LinearOut out{&kw, y.buf()};
  d->linear(x.buf(), std::span<const LinearOut>(&out, 1));
  EXPECT_EQ(d->flops(), 2u * 5 * 7 * 3);

  // GQA: 2 heads of 4 over 1 kv head, rows at visible0 = 3: they see 3, 4, 5 positions.
  const int64_t T = 3, D = 4, cap = 8;
  In q = upload(*d, r.normals(T * 2 * D), T, 2 * D), k = upload(*d, r.normals(cap * D), cap, D),
     v = upload(*d, r.normals(cap * D), cap, D);
  DeviceBuffer o(*d, BufType::F32, T, 2 * D);
  uint64_t before = d->flops();
  d->gqa_attention(GqaOp{.heads = 2, .kv_heads = 1, .head_dim = D, .scale = 0.5f}, q.buf(), k.buf(), v.buf(), 3, o.buf());
  EXPECT_EQ(d->flops() - before, 4u * 2 * D * (3 + 4 + 5));
  before = d->flops();
  d->gqa_attention(GqaOp{.heads = 2, .kv_heads = 1, .head_dim = D, .scale = 0.5f, .window = 4}, q.buf(), k.buf(),
                   v.buf(), 3, o.buf());
  EXPECT_EQ(d->flops() - before, 4u * 2 * D * (3 + 4 + 4));

  // Absorbed MLA: 2 heads, nope 4, rope 2, v_dim 3, kv_rank 6; causal rows at visible0 = 2.
  const int64_t nh = 2, nope = 4, rope = 2, vd = 3, kvr = 6;
  HostWeight kvb = random_weight(WeightType::F32, nh * (nope + vd), kvr, r);
  const Weight kvbw = d->keep(kvb.w);
  In mq = upload(*d, r.normals(T * nh * (nope + rope)), T, nh * (nope + rope)),
     lat = upload(*d, r.normals(cap * kvr), cap, kvr), pe = upload(*d, r.normals(cap * rope), cap, rope);
  DeviceBuffer mo(*d, BufType::F32, T, nh * vd);
  MlaOp mla{.heads = nh, .nope = nope, .rope = rope, .v_dim = vd, .kv_rank = kvr, .scale = 0.5f, .kv_b = &kvbw};
  before = d->flops();
  d->mla_attention(mla, mq.buf(), lat.buf(), pe.buf(), 2, mo.buf());
  EXPECT_EQ(d->flops() - before, 2u * nh * (T * (nope + vd) * kvr + (2 + 3 + 4) * (2 * kvr + rope)));
  mla.causal = false;
  before = d->flops();
  d->mla_attention(mla, mq.buf(), lat.buf(), pe.buf(), 5, mo.buf());
  EXPECT_EQ(d->flops() - before, 2u * nh * (T * (nope + vd) * kvr + 3 * 5 * (2 * kvr + rope)));
}

}  // namespace
}  // namespace sluice::device
