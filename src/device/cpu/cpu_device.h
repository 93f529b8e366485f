// The CPU device: host memory, the global thread pool, and the scalar / AVX2 / AVX-512 products of
// kernels.h. Its op bodies (cpu_device.cpp, cpu_attention.cpp, cpu_kda.cpp, cpu_moe.cpp) are the
// arithmetic the model used to do itself, moved down unchanged: the scalar ISA's results are the
// oracle for every other ISA and device.
#pragma once
#include <map>
#include <optional>
#include <algorithm>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "core/thread_pool.h"
#include "device/device.h"
#include "device/cpu/kernels.h"

namespace sluice::device {

// An accelerator emulated on the CPU (`--device cpu-emu[:GB[:GB/s]]`): the same kernels and host
// memory, but the device says it has memory of its own (`memory_bytes`, which alloc_bytes never
// exceeds) behind a link (copy_in takes bytes / link_bytes_per_s; 0: as fast as memcpy), so the
// expert tier, the split of experts between it and the host's cores, and their failure paths run
// in tests on a machine without a GPU, giving the CPU's bits.
struct Emulation {
  uint64_t memory_bytes = 4ull << 30;
  double link_bytes_per_s = 0;
};

class CpuDevice final : public Device {
 public:
  // isa == nullptr: follow the process's active ISA (set_active_isa, SLUICE_ISA) at every call.
  explicit CpuDevice(const Isa* isa, std::optional<Emulation> emulate = std::nullopt);
  ~CpuDevice() override;

  std::string name() const override;
  Place place() const override { return emu_ ? Place::Device : Place::Host; }
  MemoryInfo memory() const override;
  bool mla_reads_fp8() const override { return true; }

  Buf alloc(BufType t, int64_t rows, int64_t cols) override;
  void free(Buf b) override;
  Buf scratch(BufType t, int64_t rows, int64_t cols) override;
  size_t scratch_mark() const override { return used_; }
  void scratch_reset(size_t mark) override;
  size_t scratch_peak() const override { return peak_; }
  void reset_scratch_peak() override { peak_ = used_; }

  Weight keep(const Weight& host) override { return host; }
  Vec keep(std::span<const float> host) override { return Vec{host.data(), int64_t(host.size())}; }

  void upload(Buf dst, const void* host) override;
  void download(const Buf& src, void* host) override;
  void copy(Buf dst, const Buf& src) override;
  void fill(Buf dst, float value) override;

  Fence fence() override { return {}; }
  void wait(Fence) override {}
  void finish() override {}

  // The emulated accelerator's tier memory: host bytes, copies by memcpy (fences always passed).
  void* alloc_bytes(size_t bytes) override;
  void free_bytes(void* p) override;
  Fence copy_in(std::span<const CopyPiece> pieces, Fence after) override;

  void linear(const Buf& x, std::span<const LinearOut> outs) override;
  void embed(const Weight& table, std::span<const int32_t> ids, Buf out) override;
  void rmsnorm(const Buf& x, const Vec& w, float eps, Buf y, int64_t group) override;
  void add(Buf y, const Buf& x) override;
  void sum(Buf out, const Buf& a, const Buf& b) override;
  void mul_sigmoid(Buf y, const Buf& g) override;
  void gated_act(const Activation& a, Buf g, const Buf& u) override;
  void row_dot(const Buf& x, const Vec& w, Buf out) override;
  void attn_res(std::span<const Buf> sources, const Vec& norm, const Vec& proj, float eps, Buf out) override;

  void kda(const KdaOp& op, const KdaInputs& in, const KdaState& from, KdaState& to, const KdaRecord* rec,
           Buf out) override;
  void kda_replay(const KdaOp& op, KdaState& st, const KdaRecord& rec, int64_t n) override;

  void mla_cache_write(const Buf& kv, const Vec& norm, float eps, Buf latent, Buf k_pe, int64_t first) override;
  void mla_attention(const MlaOp& op, const Buf& q, const Buf& latent, const Buf& k_pe, int64_t visible0,
                     Buf out) override;
  void gqa_attention(const GqaOp& op, const Buf& q, const Buf& k, const Buf& v, int64_t visible0, Buf out) override;
  void rope_table(const RopeSpec& spec, int64_t first, Buf table) override;
  void rope(const Buf& table, RopePairs pairs, Buf x, int64_t heads, int64_t head_stride, int64_t offset,
            int64_t dim) override;

  void route(const RouterOp& op, const Buf& logits, Buf ids, Buf weights) override;
  void experts(const ExpertsOp& op, std::span<const ExpertView> views, std::span<const std::span<const int64_t>> members,
               const Buf& z, Buf yexp) override;
  void combine(const Buf& yexp, const Buf& weights, Buf out) override;

  uint64_t flops() const override { return flops_; }
  const Isa& isa() const { return isa_ ? *isa_ : active_isa(); }
  // Host scratch of n elements of T from the bump arena (op bodies use it for their temporaries).
  template <typename T>
  T* temp(int64_t n) {
    return static_cast<T*>(take(size_t(n) * sizeof(T)));
  }

 private:
  void* take(size_t bytes);
  // experts() when every expert has at most kBatchedExpertRows rows: the products of all experts
  // in two forks of the pool instead of three per expert (the same bits).
  static constexpr size_t kBatchedExpertRows = 8;
  void experts_batched(const ExpertsOp& op, std::span<const ExpertView> views,
                       std::span<const std::span<const int64_t>> members, const Buf& z, Buf yexp);

  const Isa* isa_;
  std::optional<Emulation> emu_;
  std::map<void*, size_t> emu_blocks_;  // alloc_bytes' blocks and sizes (emulated memory)
  uint64_t emu_used_ = 0;
  uint64_t flops_ = 0;  // see Device::flops (ops are called from one thread)
  // The scratch arena: chunks that are never moved while in use; when a pass needed more than one,
  // they are merged into one of their total size once the arena is empty again.
  struct Chunk {
    std::unique_ptr<std::byte[], AlignedFree> mem;
    size_t base = 0, size = 0;  // position of the chunk in the arena's address space
  };
  std::vector<Chunk> chunks_;
  size_t used_ = 0, peak_ = 0;
};

// g ← act(g, u) over n elements (the body of gated_act and of the routed experts' activation).
// Elements are split over the thread pool; each range runs the ISA's gated_act.
void gated_activation(const Isa& isa, const Activation& a, float* g, const float* u, int64_t n);

// f(slot, r0, r1) over rows [0, rows) split into at most the pool's size contiguous slices of at
// least `grain` rows, slot numbering the slices from 0 (for per-slice scratch). For the row-wise ops
// (each row's result its own alone), so the split changes no bit; one slice runs inline.
template <class F>
void row_slices(int64_t rows, int64_t grain, F&& f) {
  ThreadPool& pool = ThreadPool::global();
  const int64_t slots = std::max<int64_t>(1, std::min<int64_t>(pool.size(), rows / std::max<int64_t>(grain, 1)));
  if (slots == 1) return rows > 0 ? f(int64_t(0), int64_t(0), rows) : void();
  pool.parallel_for(slots, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) f(s, rows * s / slots, rows * (s + 1) / slots);
  });
}
// Rows per slice for a row of `cols` elements: about 16K elements of work a slice at least.
inline int64_t row_grain(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)); }

// Element pointer of row r of a CPU Buf.
inline float* row_ptr(const Buf& b, int64_t r) { return static_cast<float*>(b.p) + r * b.ld; }
inline int32_t* irow_ptr(const Buf& b, int64_t r) { return static_cast<int32_t*>(b.p) + r * b.ld; }

}  // namespace sluice::device
