// What one more AVX-512 instruction costs next to a stream of FMAs: the decode of a quantized
// GEMV shares the vector pipes with its FMAs, and this is how much each decode instruction slows
// the stream down on the CPU at hand. Each benchmark runs 6 independent FMA chains with one
// instruction X of a 6-chain stream after each FMA; the reported ratio is its time per FMA over
// the time per FMA of the FMAs alone, measured alternately in the same run (the floor). Its
// figures on the Zen 4 EPYC of docs/BENCHMARKS.md: sections "(2026-12-05, sixth stop)" and
// "Design measurements behind code comments".
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace {

volatile float g_sink;  // the chains' results, so that none is optimised away

// The FMAs write %0-%5 (zmm accumulators), X writes %6-%11 (its own chains); %12 and %13 are
// constant sources. X(k) expands to the instruction on chain k.
#define SLUICE_STREAM(X)                                                                                          \
  "vfmadd231ps %12, %12, %0\n\t" X(6) "\n\t"                                                                      \
  "vfmadd231ps %12, %12, %1\n\t" X(7) "\n\t"                                                                      \
  "vfmadd231ps %12, %12, %2\n\t" X(8) "\n\t"                                                                      \
  "vfmadd231ps %12, %12, %3\n\t" X(9) "\n\t"                                                                      \
  "vfmadd231ps %12, %12, %4\n\t" X(10) "\n\t"                                                                     \
  "vfmadd231ps %12, %12, %5\n\t" X(11) "\n\t"

#define SLUICE_NONE(k) ""
#define SLUICE_VPERMW(k) "vpermw %13, %" #k ", %" #k
#define SLUICE_VPSHUFB(k) "vpshufb %13, %" #k ", %" #k
#define SLUICE_VPERMPS(k) "vpermps %13, %" #k ", %" #k
#define SLUICE_VPMOVZXWD(k) "vpmovzxwd %t" #k ", %" #k
#define SLUICE_VPSRLW(k) "vpsrlw $4, %" #k ", %" #k
#define SLUICE_VPSLLD(k) "vpslld $16, %" #k ", %" #k
#define SLUICE_VPANDD(k) "vpandd %13, %" #k ", %" #k
#define SLUICE_VPADDD(k) "vpaddd %13, %" #k ", %" #k
#define SLUICE_VADDPS(k) "vaddps %13, %" #k ", %" #k
#define SLUICE_VCVTDQ2PS(k) "vcvtdq2ps %" #k ", %" #k
#define SLUICE_VCVTPH2PS(k) "vcvtph2ps %t" #k ", %" #k
#define SLUICE_VPROLVD(k) "vprolvd %13, %" #k ", %" #k
#define SLUICE_VPMULTISHIFTQB(k) "vpmultishiftqb %13, %" #k ", %" #k

#define SLUICE_LOOP(NAME, X)                                                                                      \
  __attribute__((target("avx512f,avx512bw,avx512vbmi"))) double NAME(int64_t iters) {                           \
    __m512 f0 = _mm512_set1_ps(1.0f), f1 = f0, f2 = f0, f3 = f0, f4 = f0, f5 = f0;                               \
    const __m512 one = _mm512_set1_ps(1.0f);                                                                      \
    __m512i a0 = _mm512_set1_epi32(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;                               \
    const __m512i c = _mm512_set1_epi32(3);                                                                       \
    const auto t0 = std::chrono::steady_clock::now();                                                             \
    for (int64_t i = 0; i < iters; ++i)                                                                           \
      asm volatile(SLUICE_STREAM(X)                                                                               \
                   : "+v"(f0), "+v"(f1), "+v"(f2), "+v"(f3), "+v"(f4), "+v"(f5), "+v"(a0), "+v"(a1), "+v"(a2),  \
                     "+v"(a3), "+v"(a4), "+v"(a5)                                                                 \
                   : "v"(one), "v"(c));                                                                           \
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();               \
    alignas(64) float out[16];                                                                                    \
    _mm512_store_ps(out, _mm512_add_ps(_mm512_add_ps(f0, f5), _mm512_castsi512_ps(_mm512_add_epi32(a0, a5))));  \
    g_sink = out[0];                                                                                              \
    return s;                                                                                                     \
  }

SLUICE_LOOP(fma_alone, SLUICE_NONE)
SLUICE_LOOP(with_vpermw, SLUICE_VPERMW)
SLUICE_LOOP(with_vpshufb, SLUICE_VPSHUFB)
SLUICE_LOOP(with_vpermps, SLUICE_VPERMPS)
SLUICE_LOOP(with_vpmovzxwd, SLUICE_VPMOVZXWD)
SLUICE_LOOP(with_vpsrlw, SLUICE_VPSRLW)
SLUICE_LOOP(with_vpslld, SLUICE_VPSLLD)
SLUICE_LOOP(with_vpandd, SLUICE_VPANDD)
SLUICE_LOOP(with_vpaddd, SLUICE_VPADDD)
SLUICE_LOOP(with_vaddps, SLUICE_VADDPS)
SLUICE_LOOP(with_vcvtdq2ps, SLUICE_VCVTDQ2PS)
SLUICE_LOOP(with_vcvtph2ps, SLUICE_VCVTPH2PS)
SLUICE_LOOP(with_vprolvd, SLUICE_VPROLVD)
SLUICE_LOOP(with_vpmultishiftqb, SLUICE_VPMULTISHIFTQB)

// Each iteration times the FMAs with X, then the FMAs alone; the ratio is of the medians.
void issue_cost(benchmark::State& state, double (*with)(int64_t)) {
  constexpr int64_t kIters = 200'000;  // 1.2 M FMAs: a few hundred microseconds
  std::vector<double> t_with, t_alone;
  for (auto _ : state) {
    t_alone.push_back(fma_alone(kIters));
    t_with.push_back(with(kIters));
    state.SetIterationTime(t_with.back());
  }
  auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  // Time per FMA with one X each, in units of the time per FMA alone: 1 + what X costs.
  state.counters["x_fma_alone"] = median(t_with) / median(t_alone);
}

}  // namespace

int main(int argc, char** argv) {
  __builtin_cpu_init();
  benchmark::Initialize(&argc, argv);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vbmi")) {
    const std::pair<const char*, double (*)(int64_t)> ops[] = {
        {"vpermw", with_vpermw},       {"vpshufb", with_vpshufb},   {"vpermps", with_vpermps},
        {"vpmovzxwd", with_vpmovzxwd}, {"vpsrlw", with_vpsrlw},     {"vpslld", with_vpslld},
        {"vpandd", with_vpandd},       {"vpaddd", with_vpaddd},     {"vaddps", with_vaddps},
        {"vcvtdq2ps", with_vcvtdq2ps}, {"vcvtph2ps", with_vcvtph2ps}, {"vprolvd", with_vprolvd},
        {"vpmultishiftqb", with_vpmultishiftqb}};
    for (const auto& [name, fn] : ops)
      benchmark::RegisterBenchmark((std::string("fma_plus/") + name).c_str(),
                                   [fn = fn](benchmark::State& st) { issue_cost(st, fn); })
          ->UseManualTime();
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
