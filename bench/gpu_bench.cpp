// GPU weight products against the device-to-device copy floor measured in the same run.
//
// The floor: cudaMemcpyAsync of a 2 GiB buffer into another on the same GPU, bandwidth counted
// as bytes read + bytes written per second (the HBM traffic a copy makes). A weight product is
// charged the weight bytes it must read (activations are a rounding error at N <= 8), so
// ratio = (weight bytes / time) / floor: 1.0 would be a product that streams its weights at the
// full rate HBM moves bytes. Times are host wall times of back-to-back calls through the device
// interface ending in finish(), so launch overhead is included, as a decode step pays it.
//
// Cases (issue 37's goals): BF16 GEMV 49152x7168 at N = 1, 2, 8, 16 (N = 1 >= 0.9, N = 8 >= 0.8),
// MXFP4 24576x7168, FP8 16384x7168 (128x128 block scales) and INT4 16384x7168 at N = 1 and 8
// (N = 8 >= 0.8 for MXFP4 and FP8), one K3 layer's 16 routed MXFP4 experts (3 matrices of
// 3072x3584 each) at N = 1 (>= 0.7) and 8, and a prefill-sized BF16 product (7168x7168, N = 4096)
// in TFLOP/s. Every case runs on `cuda` (the tensor-core products) and on `cuda-ffma` (the
// CUDA-core products of the first pass), some once on `cuda-ref`; the BF16
// GEMV also on the CPU device of the machine, for the ratio users see. The weights are larger
// than the L2 (50 MB), so each call reads them from HBM.
// Usage: gpu_bench [--quick] [--only TEXT] (--only: just the cases whose name and device contain
// TEXT, e.g. for a profiler; other arguments, such as bench.sh's, are ignored).
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "device/cuda/cuda_device.h"
#include "device/device.h"

namespace {

using namespace sluice::device;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "gpu_bench: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

// Bytes read + written per second by a device-to-device copy of `bytes`, best of `reps`.
double copy_floor(size_t bytes, int reps) {
  void *a = nullptr, *b = nullptr;
  if (!check(cudaMalloc(&a, bytes), "cudaMalloc") || !check(cudaMalloc(&b, bytes), "cudaMalloc")) return 0;
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  float best = 1e30f;
  for (int i = 0; i < reps + 1; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i > 0) best = std::min(best, ms);  // the first copy warms up
  }
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 2.0 * double(bytes) / (double(best) * 1e-3);
}

struct HostWeight {
  Weight w;
  std::vector<uint8_t> bytes, scales;
};
HostWeight random_weight(WeightType t, int64_t rows, int64_t cols, std::mt19937_64& rng) {
  HostWeight h;
  h.w.type = t;
  h.w.rows = rows;
  h.w.cols = cols;
  if (t == WeightType::BF16) {
    h.bytes.resize(size_t(rows * cols) * 2);
    std::normal_distribution<float> n(0.0f, 1.0f / std::sqrt(float(cols)));
    uint16_t* p = reinterpret_cast<uint16_t*>(h.bytes.data());
    for (int64_t i = 0; i < rows * cols; ++i) p[i] = sluice::f32_to_bf16(n(rng));
  } else if (t == WeightType::MXFP4) {
    h.bytes.resize(size_t(rows * cols) / 2);
    h.scales.resize(size_t(rows * cols) / 32);
    for (auto& b : h.bytes) b = uint8_t(rng());
    for (auto& s : h.scales) s = uint8_t(120 + rng() % 5);
    h.w.scales = h.scales.data();
  } else if (t == WeightType::FP8_E4M3) {
    h.bytes.resize(size_t(rows * cols));
    for (auto& b : h.bytes) b = uint8_t(rng() % 0x7f) | uint8_t(rng() & 0x80);  // no NaN code
    const size_t blocks = size_t((rows + 127) / 128) * size_t((cols + 127) / 128);
    h.scales.resize(blocks * 4);
    float* sc = reinterpret_cast<float*>(h.scales.data());
    for (size_t i = 0; i < blocks; ++i) sc[i] = 1e-3f * float(1 + rng() % 7);
    h.w.scales = h.scales.data();
    h.w.fp8_finite = true;
  } else {  // INT4_G32
    h.bytes.resize(size_t(rows * cols) / 2);
    for (auto& b : h.bytes) b = uint8_t(rng());
    h.scales.resize(size_t(rows * cols) / 32 * 2);
    uint16_t* sc = reinterpret_cast<uint16_t*>(h.scales.data());
    for (size_t i = 0; i < h.scales.size() / 2; ++i) sc[i] = sluice::f32_to_bf16(1e-2f * float(1 + rng() % 9));
    h.w.scales = h.scales.data();
  }
  h.w.data = h.bytes.data();
  return h;
}
size_t bytes_of(const HostWeight& h) { return h.bytes.size() + h.scales.size(); }

struct Row {
  std::string what, device;
  double seconds, bytes, ratio, goal;
};
std::vector<Row> rows;
std::string only;  // --only: the cases to run
bool wanted(const std::string& what, const Device& d) {
  return only.empty() || (what + " " + d.name()).find(only) != std::string::npos;
}
struct FlopRow {
  std::string what, device;
  double seconds, tflops;
};
std::vector<FlopRow> flop_rows;

void report(const std::string& what, const std::string& dev, double s, double bytes, double floor, double goal) {
  const double r = bytes / s / floor;
  rows.push_back({what, dev, s, bytes, r, goal});
  std::printf("%-44s %-28s %9.1f us  %8.1f GB/s  %.3f of the copy floor%s\n", what.c_str(), dev.c_str(), s * 1e6,
              bytes / s / 1e9, r, goal > 0 ? (r >= goal ? "  (goal met)" : "  (goal MISSED)") : "");
  std::fflush(stdout);
}

// Seconds per call of fn() on d, best of `trials` means over `reps` calls.
template <typename F>
double time_calls(Device& d, int reps, int trials, F fn) {
  fn();
  d.finish();
  double best = 1e30;
  for (int t = 0; t < trials; ++t) {
    const auto t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    d.finish();
    best = std::min(best, seconds_since(t0) / reps);
  }
  return best;
}

std::string label(const HostWeight& h, int64_t n) {
  return std::string("linear ") + weight_type_name(h.w.type) + " " + std::to_string(h.w.rows) + "x" +
         std::to_string(h.w.cols) + " N=" + std::to_string(n);
}

// Inputs of varied magnitude (never zeros: they can run faster than real data).
std::vector<float> inputs(int64_t n, int64_t cols) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> xs(size_t(n * cols));
  for (float& v : xs) v = d(rng);
  return xs;
}

// Seconds per d.linear of h's weight over n input rows (best of `trials` means of `reps` calls).
double time_linear(Device& d, const HostWeight& h, int64_t n, int reps, int trials) {
  const Weight w = d.keep(h.w);
  DeviceBuffer x(d, BufType::F32, n, h.w.cols), y(d, BufType::F32, n, h.w.rows);
  d.upload(x.buf(), inputs(n, h.w.cols).data());
  const LinearOut out[] = {{&w, y.buf()}};
  return time_calls(d, reps, trials, [&] { d.linear(x.buf(), out); });
}

void gemv_case(Device& d, const HostWeight& h, int64_t n, double floor, double goal, int reps) {
  if (!wanted(label(h, n), d)) return;
  report(label(h, n), d.name(), time_linear(d, h, n, reps, 3), double(bytes_of(h)), floor, goal);
}

// A prefill-sized product: TFLOP/s (2·rows·cols·n per call), printed beside the bandwidth rows.
void flops_case(Device& d, const HostWeight& h, int64_t n, int reps) {
  if (!wanted(label(h, n), d)) return;
  const double s = time_linear(d, h, n, reps, 2);
  const double tflops = 2.0 * double(h.w.rows) * double(h.w.cols) * double(n) / s / 1e12;
  std::printf("%-44s %-28s %9.1f us  %8.1f TFLOP/s\n", label(h, n).c_str(), d.name().c_str(), s * 1e6, tflops);
  flop_rows.push_back({label(h, n), d.name(), s, tflops});
}

void experts_case(Device& d, std::vector<HostWeight>& ws, int64_t n, double floor, double goal, int reps) {
  const int E = int(ws.size() / 3);
  const std::string what = std::to_string(E) + " MXFP4 experts 3x[3072x3584] N=" + std::to_string(n);
  if (!wanted(what, d)) return;
  std::vector<ExpertView> views(static_cast<size_t>(E));
  double bytes = 0;
  for (int e = 0; e < E; ++e) {
    views[size_t(e)] = {d.keep(ws[size_t(3 * e)].w), d.keep(ws[size_t(3 * e + 1)].w), d.keep(ws[size_t(3 * e + 2)].w), {}};
    for (int j = 0; j < 3; ++j) bytes += double(bytes_of(ws[size_t(3 * e + j)]));
  }
  const int64_t R = ws[0].w.cols;
  // Every row routed to every expert (top_k = E): member m = row·E + slot.
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e)
    for (int64_t t = 0; t < n; ++t) members[size_t(e)].push_back(t * E + e);
  std::vector<std::span<const int64_t>> spans(members.begin(), members.end());
  DeviceBuffer z(d, BufType::F32, n, R), yexp(d, BufType::F32, n * E, R);
  d.upload(z.buf(), inputs(n, R).data());
  ExpertsOp op;
  op.act.kind = ActKind::SiTU;
  op.top_k = E;
  const double s = time_calls(d, reps, 3, [&] { d.experts(op, views, spans, z.buf(), yexp.buf()); });
  report(what, d.name(), s, bytes, floor, goal);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    quick |= std::strcmp(argv[i], "--quick") == 0;
    if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
  }
  if (cuda_device_count() == 0) {
    std::printf("gpu_bench: no CUDA device on this machine; nothing to measure\n");
    return 0;
  }
  for (const std::string& g : cuda_device_descriptions()) std::printf("%s\n", g.c_str());
  cudaSetDevice(0);
  const double floor = copy_floor(size_t(2) << 30, quick ? 3 : 10);
  std::printf("copy floor: device-to-device cudaMemcpy of 2 GiB, %.1f GB/s (read + write)\n\n", floor / 1e9);
  if (floor <= 0) return 1;

  std::mt19937_64 rng(7);
  auto cuda = open_device("cuda:0");
  auto ffma = open_device("cuda-ffma:0");
  auto ref = open_device("cuda-ref:0");
  auto cpu = open_device("cpu");
  const int reps = quick ? 5 : 50;
  {
    const HostWeight big = random_weight(WeightType::BF16, 49152, 7168, rng);
    for (Device* d : {cuda.get(), ffma.get()})
      for (int64_t n : {1, 2, 8, 16}) gemv_case(*d, big, n, floor, n == 1 ? 0.9 : n == 8 ? 0.8 : 0, reps);
    gemv_case(*ref, big, 1, floor, 0, 2);
    // The CPU of the same machine on the same GEMV, against the same floor (for the speedup).
    gemv_case(*cpu, big, 1, floor, 0, quick ? 1 : 3);
  }
  for (auto [t, r] : {std::pair{WeightType::MXFP4, 24576}, std::pair{WeightType::FP8_E4M3, 16384},
                      std::pair{WeightType::INT4_G32, 16384}}) {
    const HostWeight h = random_weight(t, r, 7168, rng);
    for (Device* d : {cuda.get(), ffma.get()})
      for (int64_t n : {1, 8}) gemv_case(*d, h, n, floor, n == 8 && t != WeightType::INT4_G32 ? 0.8 : 0, reps);
  }
  std::vector<HostWeight> experts;
  for (int e = 0; e < 16; ++e) {
    experts.push_back(random_weight(WeightType::MXFP4, 3072, 3584, rng));  // gate
    experts.push_back(random_weight(WeightType::MXFP4, 3072, 3584, rng));  // up
    experts.push_back(random_weight(WeightType::MXFP4, 3584, 3072, rng));  // down
  }
  for (Device* d : {cuda.get(), ffma.get()}) {
    experts_case(*d, experts, 1, floor, 0.7, reps);
    experts_case(*d, experts, 8, floor, 0, quick ? 5 : 20);
  }
  experts_case(*ref, experts, 1, floor, 0, 2);
  {
    const HostWeight sq = random_weight(WeightType::BF16, 7168, 7168, rng);
    for (Device* d : {cuda.get(), ffma.get()}) flops_case(*d, sq, 4096, quick ? 2 : 5);
  }

  std::printf("\n| case | device | time | GB/s | of copy floor | goal |\n|---|---|---:|---:|---:|---:|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %.1f us | %.0f | %.3f | %s |\n", r.what.c_str(), r.device.c_str(), r.seconds * 1e6,
                r.bytes / r.seconds / 1e9, r.ratio,
                r.goal > 0 ? (std::string(r.ratio >= r.goal ? "met " : "MISSED ") + std::to_string(r.goal).substr(0, 4)).c_str()
                           : "-");
  std::printf("\n| prefill-sized product | device | time | TFLOP/s |\n|---|---|---:|---:|\n");
  for (const FlopRow& r : flop_rows)
    std::printf("| %s | %s | %.0f us | %.1f |\n", r.what.c_str(), r.device.c_str(), r.seconds * 1e6, r.tflops);
  return 0;
}
