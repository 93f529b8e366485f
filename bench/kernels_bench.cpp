// Single-core weight-product benchmarks on routed-expert shapes (Kimi K3's MXFP4 and BF16 [3072, 3584]
// and [3584, 3072]; DeepSeek-V3's FP8 and Kimi-K2-Thinking's INT4 [2048, 7168] and [7168, 2048]),
// reported as weight bytes per second next to a memory-read floor measured between the same calls
// on buffers of the same size, and as the ratio of the two.
//
// Every timed call reads a different copy of the weights, cycling through more than 256 MiB, so
// that the weights come from DRAM as routed experts do rather than from the L3. The floor streams
// through its own 256 MiB buffer the same way, one weight-sized chunk after every call. Rows
// named threads:N run the engine's threaded linear() against a floor read by the same threads.
//
// The weights and the floor's buffer are in 4 KiB pages, as the engine's are (the expert cache's
// arena, a resident checkpoint's mapping). SLUICE_BENCH_PAGES=huge asks for 2 MiB pages for both
// (core/arena.h: Pages), to see what TLB misses cost; the report says how much was granted.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "core/arena.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "device/cpu/kernels.h"

namespace {

using sluice::device::Isa;
using sluice::device::Weight;
using sluice::device::WeightType;

constexpr size_t kSweepBytes = size_t(256) << 20;  // far above L3, so every read comes from DRAM

sluice::Pages bench_pages() {
  static const sluice::Pages pages = [] {
    const char* e = std::getenv("SLUICE_BENCH_PAGES");
    return e && std::string(e) == "huge" ? sluice::Pages::Huge : sluice::Pages::Small;
  }();
  return pages;
}

// Every buffer the benchmarks read, for the report's huge-page line.
std::vector<std::pair<const void*, size_t>>& bench_buffers() {
  static std::vector<std::pair<const void*, size_t>> all;
  return all;
}

std::unique_ptr<std::byte[], sluice::AlignedFree> bench_buffer(size_t bytes) {
  auto b = sluice::allocate_touched(bytes, 64, false, bench_pages());
  bench_buffers().emplace_back(b.get(), bytes);
  return b;
}

using Buffer = std::unique_ptr<std::byte[], sluice::AlignedFree>;

uint64_t next_random(uint64_t& s) {  // xorshift64*: filling hundreds of MiB must be quick
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 0x2545f4914f6cdd1dull;
}

// Copies of one weight matrix with random contents (MXFP4 scales near 2^0, bf16 ~ N(0,1)-sized).
struct WeightSet {
  std::vector<Buffer> data, scales;
  std::vector<Weight> copies;
  size_t bytes_per_copy = 0;
};

// `copies` 0: enough to sweep kSweepBytes, so that every product reads its weights from DRAM.
WeightSet make_weight_set(WeightType type, int64_t rows, int64_t cols, size_t copies = 0) {
  WeightSet set;
  Weight shape;
  shape.type = type;
  shape.rows = rows;
  shape.cols = cols;
  const size_t data_bytes = sluice::device::weight_data_bytes(shape);
  const size_t scale_bytes = sluice::device::weight_scale_bytes(shape);
  set.bytes_per_copy = data_bytes + scale_bytes;
  const size_t count = copies > 0 ? copies : std::max<size_t>(2, kSweepBytes / set.bytes_per_copy + 1);
  uint64_t s = 0x9e3779b97f4a7c15ull;
  for (size_t k = 0; k < count; ++k) {
    set.data.push_back(bench_buffer(data_bytes));
    auto* d = reinterpret_cast<uint8_t*>(set.data.back().get());
    if (type == WeightType::MXFP4) {
      for (size_t i = 0; i < data_bytes; i += 8) {
        uint64_t v = next_random(s);
        std::memcpy(d + i, &v, std::min<size_t>(8, data_bytes - i));
      }
      set.scales.push_back(bench_buffer(scale_bytes));
      auto* sc = reinterpret_cast<uint8_t*>(set.scales.back().get());
      for (size_t i = 0; i < scale_bytes; ++i) sc[i] = uint8_t(117 + next_random(s) % 21);
    } else if (type == WeightType::INT4_G32) {
      // Random int4 codes and Kimi-K2-Thinking-like positive BF16 group scales (~2e-3).
      for (size_t i = 0; i < data_bytes; i += 8) {
        uint64_t v = next_random(s);
        std::memcpy(d + i, &v, std::min<size_t>(8, data_bytes - i));
      }
      set.scales.push_back(bench_buffer(scale_bytes));
      auto* sc = reinterpret_cast<uint16_t*>(set.scales.back().get());
      for (size_t i = 0; i < scale_bytes / 2; ++i) sc[i] = uint16_t(0x3b00 + next_random(s) % 128);
    } else if (type == WeightType::FP8_E4M3) {
      // Finite e4m3 codes (0x7f and 0xff are NaN) and DeepSeek-V3-like block scales (~1e-3).
      for (size_t i = 0; i < data_bytes; ++i) {
        uint8_t b = uint8_t(next_random(s));
        if ((b & 0x7f) == 0x7f) b ^= 0x01;
        d[i] = b;
      }
      set.scales.push_back(bench_buffer(scale_bytes));
      auto* sc = reinterpret_cast<float*>(set.scales.back().get());
      for (size_t i = 0; i < scale_bytes / 4; ++i) sc[i] = 0.0005f + 0.001f * float(next_random(s) % 8);
    } else {
      auto* h = reinterpret_cast<uint16_t*>(d);
      for (size_t i = 0; i < size_t(rows * cols); ++i) {
        // Sign, exponent 2^-3..2^0 and a random 7-bit mantissa: ordinary weight magnitudes.
        uint64_t v = next_random(s);
        h[i] = uint16_t((v & 0x8000) | ((124 + (v >> 16) % 4) << 7) | ((v >> 24) & 0x7f));
      }
    }
    Weight w;
    w.type = type;
    w.rows = rows;
    w.cols = cols;
    w.data = d;
    w.scales = scale_bytes > 0 ? static_cast<const void*>(set.scales.back().get()) : nullptr;
    // Checked once, as the loaders check resident FP8 weights (weight.h: fp8_finite).
    if (type == WeightType::FP8_E4M3) w.fp8_finite = !sluice::device::fp8_has_nan_code(d, data_bytes);
    set.copies.push_back(w);
  }
  return set;
}

// ---- the floor: a streaming sum over the sweep buffer with the widest loads the CPU has ----

__attribute__((target("avx512f"))) uint64_t stream_sum_avx512(const std::byte* p, size_t bytes) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 256 <= bytes; i += 256) {
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  return sum;
}

__attribute__((target("avx2"))) uint64_t stream_sum_avx2(const std::byte* p, size_t bytes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= bytes; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  alignas(32) uint64_t lanes[4];
  __m256i sum = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

uint64_t stream_sum(const std::byte* p, size_t bytes) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx512) return stream_sum_avx512(p, bytes);
  if (avx2) return stream_sum_avx2(p, bytes);
  uint64_t sum = 0;
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    sum += v;
  }
  return sum;
}

const std::byte* sweep_buffer() {
  static Buffer buffer = [] {
    // One weight-sized chunk beyond kSweepBytes (the largest, bf16, is 21 MiB); zeroed and touched.
    return bench_buffer(kSweepBytes + (size_t(64) << 20));
  }();
  return buffer.get();
}

// Streams the next weight-sized chunk of the sweep buffer (wrapping) and returns the seconds it
// took; with `threaded`, the chunk is split over the global thread pool like linear() splits rows.
class FloorReader {
 public:
  FloorReader(size_t bytes, bool threaded)
      : chunk_(bytes / 256 * 256), chunks_(kSweepBytes / chunk_ + 1), threaded_(threaded) {}
  double read_next() {
    const std::byte* base = sweep_buffer() + k_ * chunk_;
    const auto t0 = std::chrono::steady_clock::now();
    if (threaded_) {
      const int64_t pieces = int64_t(chunk_ / 256);
      sluice::ThreadPool::global().parallel_for(pieces, 1024, [&](int64_t a, int64_t b) {
        benchmark::DoNotOptimize(stream_sum(base + a * 256, size_t(b - a) * 256));
      });
    } else {
      benchmark::DoNotOptimize(stream_sum(base, chunk_));
    }
    const auto t1 = std::chrono::steady_clock::now();
    k_ = (k_ + 1) % chunks_;
    return std::chrono::duration<double>(t1 - t0).count();
  }
  size_t chunk() const { return chunk_; }

 private:
  size_t chunk_, chunks_, k_ = 0;
  bool threaded_;
};

// ---- the kernels ----

WeightSet& weight_set(WeightType type, int64_t rows, int64_t cols) {
  static std::map<std::tuple<int, int64_t, int64_t>, WeightSet> sets;
  auto key = std::make_tuple(int(type), rows, cols);
  auto it = sets.find(key);
  if (it == sets.end()) {
    sets.clear();  // one set alive at a time keeps the footprint near 300 MiB
    it = sets.emplace(key, make_weight_set(type, rows, cols)).first;
  }
  return it->second;
}

double median(std::vector<double>& v) {
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Each iteration times one product on the next weight copy, then one floor read of the same
// number of bytes from the sweep buffer (A/B alternation at the finest grain, so both see the
// same machine load). The benchmark's time is the product's; the counters compare medians of
// the per-call times, which other processes on a shared machine disturb least.
// `threaded` runs linear() with this ISA active (rows over the global thread pool) against a floor
// read by the same threads; otherwise linear_on() on the calling thread.
void kernel_bench(benchmark::State& state, const Isa* isa, WeightType type, int64_t rows, int64_t cols, int64_t n,
                  bool threaded) {
  WeightSet& set = weight_set(type, rows, cols);
  std::vector<float> x(size_t(n * cols)), y(size_t(n * rows));
  uint64_t s = 12345;
  for (float& v : x) v = float(int64_t(next_random(s) % 2001) - 1000) / 1000.0f;
  FloorReader floor(set.bytes_per_copy, threaded);
  if (threaded) sluice::device::set_active_isa(isa->name);
  std::vector<double> kernel_seconds, floor_seconds;
  size_t k = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (threaded) sluice::device::linear(set.copies[k], x.data(), n, y.data());
    else sluice::device::linear_on(*isa, set.copies[k], x.data(), n, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(t);
    kernel_seconds.push_back(t);
    floor_seconds.push_back(floor.read_next());
    k = (k + 1) % set.copies.size();
  }
  const double kernel_rate = double(set.bytes_per_copy) / median(kernel_seconds);
  const double floor_rate = double(floor.chunk()) / median(floor_seconds);
  const double kernel_best =
      double(set.bytes_per_copy) / *std::min_element(kernel_seconds.begin(), kernel_seconds.end());
  const double floor_best = double(floor.chunk()) / *std::min_element(floor_seconds.begin(), floor_seconds.end());
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(set.bytes_per_copy));
  state.counters["MACs"] =
      benchmark::Counter(double(state.iterations()) * double(rows * cols * n), benchmark::Counter::kIsRate);
  state.counters["weight_GBps"] = kernel_rate / 1e9;
  state.counters["floor_GBps"] = floor_rate / 1e9;
  state.counters["ratio"] = kernel_rate / floor_rate;
  state.counters["ratio_best"] = kernel_best / floor_best;  // fastest call over fastest floor read
}

// ---- the summary: each kernel's bytes/s over the mean of its group's two floor runs ----

class RatioReporter : public benchmark::ConsoleReporter {
 public:
  RatioReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      auto get = [&](const char* key) {
        auto it = run.counters.find(key);
        return it == run.counters.end() ? -1.0 : double(it->second.value);
      };
      if (get("peak_ratio") >= 0) passes_.push_back({run.benchmark_name(), get("GFLOPs"), get("peak_GFLOPs"),
                                                       get("peak_ratio"), get("peak_ratio_best")});
      if (get("ratio") < 0) continue;
      rows_.push_back(
          {run.benchmark_name(), get("weight_GBps"), get("floor_GBps"), get("ratio"), get("ratio_best")});
    }
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf("\nWeight bytes/s vs the memory-read floor measured between the same calls (single core unless\n"
                "the name says threads:N, whose floor is read by the same N threads):\n");
    std::printf("(medians of per-call times; ratio_best compares the fastest call with the fastest floor read)\n");
    size_t all = 0, huge = 0;
    for (const auto& [p, bytes] : bench_buffers()) {
      all += bytes;
      huge += sluice::huge_page_bytes(p, bytes);
    }
    std::printf("weights and floor buffer: %.0f of %.0f MiB in 2 MiB pages (%s)\n", double(huge) / (1 << 20),
                double(all) / (1 << 20),
                bench_pages() == sluice::Pages::Huge ? "SLUICE_BENCH_PAGES=huge: asked for"
                                                     : "4 KiB pages asked for, as the engine's");
    std::printf("%-48s %12s %12s %7s %11s\n", "kernel", "GB/s (1e9)", "floor GB/s", "ratio", "ratio_best");
    for (const Row& r : rows_)
      std::printf("%-48s %12.2f %12.2f %7.3f %11.3f\n", r.name.c_str(), r.rate, r.floor, r.ratio, r.ratio_best);
    if (!passes_.empty()) {
      std::printf("\nProducts of a prefill pass (weights in cache, n vectors, one core) vs the fp32 FMA peak\n"
                  "measured between the same calls:\n");
      std::printf("%-48s %12s %12s %7s %11s\n", "kernel", "GFLOP/s", "peak GFLOP/s", "ratio", "ratio_best");
      for (const Row& r : passes_)
        std::printf("%-48s %12.1f %12.1f %7.3f %11.3f\n", r.name.c_str(), r.rate, r.floor, r.ratio, r.ratio_best);
    }
    std::fflush(stdout);
  }

 private:
  struct Row {
    std::string name;
    double rate, floor, ratio, ratio_best;
  };
  std::vector<Row> rows_, passes_;
};

const char* type_tag(WeightType t) {
  switch (t) {
    case WeightType::MXFP4: return "mxfp4";
    case WeightType::BF16: return "bf16";
    case WeightType::FP8_E4M3: return "fp8";
    case WeightType::INT4_G32: return "int4";
    case WeightType::F32: break;
  }
  return "f32";
}

// The CPU's fp32 multiply-add peak: 12 independent chains of 16-lane FMAs per thread, all in
// registers (no memory, no dependence within a latency window), as floating-point operations per
// second (an FMA counts two). No product, attention or recurrence computes faster: the FLOP floor
// of a pass is its FLOP count (Device::flops) over this rate, measured in the same run.
// fused: acc = acc·a + b as one FMA; unfused: a multiply, then an add (the exact kernels' form: each
// product rounded before its sum), which on some cores runs on separate pipes at the same rate.
template <bool Fused>
__attribute__((target("avx512f,fma"))) float fma_chains_avx512(int64_t iters, float seed) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(seed + float(i));
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  // Unrolled, or GCC at -O2 keeps acc in memory and each chain waits on a store and a load, and
  // the peak comes out far too low (docs/BENCHMARKS.md, "Design measurements behind code
  // comments").
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i)
      acc[i] = Fused ? _mm512_fmadd_ps(acc[i], a, b) : _mm512_add_ps(_mm512_mul_ps(acc[i], a), b);
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, s);
  float sum = 0;
  for (float x : lanes) sum += x;
  return sum;
}

void fma_peak(benchmark::State& st, int threads, bool fused) {
  constexpr int64_t kIters = 2'000'000;  // 384 M FLOPs per thread: a few tens of ms
  double flops = 0;
  for (auto _ : st) {
    std::vector<std::thread> pool;
    std::vector<float> sink(static_cast<size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        sink[size_t(t)] = fused ? fma_chains_avx512<true>(kIters, float(t)) : fma_chains_avx512<false>(kIters, float(t));
      });
    for (auto& th : pool) th.join();
    st.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    benchmark::DoNotOptimize(sink.data());
    flops += double(threads) * double(kIters) * 12 * 16 * 2;
  }
  st.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
}

// One product of a prefill pass: n vectors through a small weight that stays in cache (the
// default model's projections), its FLOP rate against the FMA peak of a short burst of
// fma_chains_avx512 timed after every call (medians, as kernel_bench does with its floor).
void pass_bench(benchmark::State& state, const Isa* isa, WeightType type, int64_t rows, int64_t cols, int64_t n) {
  static std::map<std::tuple<int, int64_t, int64_t>, WeightSet> sets;
  auto key = std::make_tuple(int(type), rows, cols);
  if (!sets.count(key)) sets.emplace(key, make_weight_set(type, rows, cols, 1));
  const Weight& w = sets.at(key).copies[0];
  std::vector<float> x(size_t(n * cols)), y(size_t(n * rows));
  uint64_t s = 12345;
  for (float& v : x) v = float(int64_t(next_random(s) % 2001) - 1000) / 1000.0f;
  constexpr int64_t kBurst = 20'000;  // 7.7 MFLOP: tens of microseconds
  std::vector<double> kernel_seconds, peak_seconds;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    sluice::device::linear_on(*isa, w, x.data(), n, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    const auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(fma_chains_avx512<true>(kBurst, 1.0f));
    const auto t2 = std::chrono::steady_clock::now();
    kernel_seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
    peak_seconds.push_back(std::chrono::duration<double>(t2 - t1).count());
    state.SetIterationTime(kernel_seconds.back());
  }
  const double flops = 2.0 * double(rows * cols * n), peak_flops = double(kBurst) * 12 * 16 * 2;
  const double rate = flops / median(kernel_seconds), peak = peak_flops / median(peak_seconds);
  const double best = flops / *std::min_element(kernel_seconds.begin(), kernel_seconds.end());
  const double peak_best = peak_flops / *std::min_element(peak_seconds.begin(), peak_seconds.end());
  state.counters["GFLOPs"] = rate / 1e9;
  state.counters["peak_GFLOPs"] = peak / 1e9;
  state.counters["peak_ratio"] = rate / peak;
  state.counters["peak_ratio_best"] = best / peak_best;
}

}  // namespace

int main(int argc, char** argv) {
  __builtin_cpu_init();
  benchmark::Initialize(&argc, argv);
  // Every kernel set (the AVX-512 one without VBMI too, on a CPU with VBMI); the engine's choice is best.
  const std::vector<const Isa*> isas = sluice::device::isa_variants();
  const Isa* best = sluice::device::available_isas().back();
  struct Shape {
    int64_t rows, cols;
  };
  // Gate/up and down of a routed expert: K3's (MXFP4, and BF16 for comparison), DeepSeek-V3's FP8
  // ones and Kimi-K2-Thinking's INT4 ones ([2048, 7168] and [7168, 2048]).
  const Shape k3_shapes[] = {{3072, 3584}, {3584, 3072}};
  const Shape dsv3_shapes[] = {{2048, 7168}, {7168, 2048}};
  for (WeightType type : {WeightType::MXFP4, WeightType::BF16, WeightType::FP8_E4M3, WeightType::INT4_G32}) {
    const auto& shapes = type == WeightType::FP8_E4M3 || type == WeightType::INT4_G32 ? dsv3_shapes : k3_shapes;
    for (const Shape& sh : shapes) {
      const std::string group =
          std::string(type_tag(type)) + "_" + std::to_string(sh.rows) + "x" + std::to_string(sh.cols);
      for (const Isa* isa : isas) {
        std::vector<int64_t> batches{1};
        if (isa == best) batches = {1, 2, 4, 8};
        else if (isa != isas.front()) batches = {1, 4};
        for (int64_t n : batches) {
          benchmark::RegisterBenchmark(
              (group + "/" + isa->name + "/n:" + std::to_string(n)).c_str(),
              [=](benchmark::State& st) { kernel_bench(st, isa, type, sh.rows, sh.cols, n, false); })
              ->UseManualTime();
        }
      }
      // The engine's own path for comparison: every core, against a floor read by every core.
      const std::string threads = std::to_string(sluice::ThreadPool::global().size());
      for (int64_t n : {1, 4}) {
        benchmark::RegisterBenchmark(
            (group + "/" + best->name + "-threads:" + threads + "/n:" + std::to_string(n)).c_str(),
            [=](benchmark::State& st) { kernel_bench(st, best, type, sh.rows, sh.cols, n, true); })
            ->UseManualTime();
      }
    }
  }
  // Prefill passes through the default model's projection shapes (hidden 256, MLP 1024): 256
  // vectors, as in_vector_blocks hands a 256-column weight at a time.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")) {
    const Shape pass_shapes[] = {{256, 256}, {1024, 256}, {256, 1024}};
    for (WeightType type : {WeightType::BF16, WeightType::MXFP4})
      for (const Shape& sh : pass_shapes)
        benchmark::RegisterBenchmark((std::string("pass_") + type_tag(type) + "_" + std::to_string(sh.rows) + "x" +
                                      std::to_string(sh.cols) + "/" + best->name + "/n:256")
                                         .c_str(),
                                     [=](benchmark::State& st) { pass_bench(st, best, type, sh.rows, sh.cols, 256); })
            ->UseManualTime();
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma"))
    for (bool fused : {true, false})
      for (int threads : {1, int(sluice::ThreadPool::global().size())})
        benchmark::RegisterBenchmark(
            (std::string(fused ? "fma_peak" : "muladd_peak") + "/avx512/threads:" + std::to_string(threads)).c_str(),
            [=](benchmark::State& st) { fma_peak(st, threads, fused); })
            ->UseManualTime();
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
