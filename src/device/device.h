// The backend-neutral compute interface. Model code is written once against a Device: it owns
// memory (activations, states and scratch that stay where the device computes), keeps weights,
// moves bytes, and runs a set of coarse ops, one per fused step a GPU should do in one or a few
// launches. Model code never reads an activation except through download() at a named sync point
// (a MoE layer's route ids, the logits, captured hidden rows); index lists it decides on the host
// (token ids, expert member rows) are passed to ops as host spans.
//
// Every op on every device keeps the batch-invariance contract of weight.h: an output row depends
// only on its own input rows, the weights and the state, never on how many rows the pass has, the
// thread split or timing. The CPU device's scalar ISA is the oracle every other ISA and device is
// tested against (tests/unit/backend_ops_test.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "device/weight.h"

namespace sluice::device {

enum class BufType : uint8_t { F32, I32 };

// A [rows, cols] matrix of 4-byte elements in one device's memory, row stride `ld` elements.
// A view: it owns nothing. Model code passes Bufs to ops and never dereferences one.
struct Buf {
  void* p = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  BufType type = BufType::F32;
  Place place = Place::Host;

  bool empty() const { return p == nullptr; }
  bool contiguous() const { return ld == cols; }
  int64_t size() const { return rows * cols; }
  Buf rows_view(int64_t r0, int64_t n) const;  // rows r0..r0+n-1
  Buf cols_view(int64_t c0, int64_t n) const;  // columns c0..c0+n-1 of every row (strided)
  // The same elements seen as [rows', cols'] (contiguous Bufs only; rows'·cols' = rows·cols).
  Buf reshaped(int64_t rows2, int64_t cols2) const;
};

// A small fp32 parameter vector kept where the device computes (norm weights, biases, conv taps).
struct Vec {
  const float* p = nullptr;
  int64_t n = 0;
  bool empty() const { return p == nullptr; }
};

// ---- op descriptions (small typed specs, not argument lists) ----

// Gated activations g ← act(g, u), elementwise.
enum class ActKind : uint8_t {
  SiLU,           // silu(g)·u (SwiGLU)
  SiTU,           // [β_g·tanh(g/β_g)·σ(g)]·[β_u·tanh(u/β_u)] (Kimi K3)
  ClampedSwiGLU,  // gpt-oss: g ≤ limit, -limit ≤ u ≤ limit, g·σ(α·g)·(u + 1)
};
struct Activation {
  ActKind kind = ActKind::SiLU;
  float beta_gate = 4.0f, beta_up = 25.0f;  // SiTU
  float alpha = 1.702f, limit = 7.0f;       // ClampedSwiGLU
};

// One product of a multi-weight linear: y = W·x (+ bias), x shared by every item.
struct LinearOut {
  const Weight* w = nullptr;
  Buf y;  // [T, w->rows]
};

// Kimi Delta Attention after its projections: short causal conv + SiLU of q/k/v, per-head l2norm
// (q scaled by 1/sqrt(dk)), the channel-wise log-decay gate, σ(β), the delta rule row by row, and
// the per-head RMSNorm with a sigmoid output gate.
struct KdaOp {
  int64_t heads = 0, head_dim = 0, conv_kernel = 4;
  float norm_eps = 1e-5f;           // o_norm
  bool lower_bound_gate = false;    // K3: lb·σ(exp(A)·(f + dt_bias)); else -exp(A)·softplus(f + dt_bias)
  float lower_bound = 0.0f;
  Vec q_conv, k_conv, v_conv;       // [P, K], oldest tap first
  Vec dt_bias;                      // [P]
  Vec a_log;                        // [heads]
  Vec o_norm;                       // [head_dim]
  int64_t dim() const { return heads * head_dim; }
};
struct KdaInputs {
  Buf q, k, v;  // raw projections [T, P]
  Buf f;        // f_b output [T, P] (the gate's input before dt_bias)
  Buf beta;     // b_proj output [T, heads] (before σ)
  Buf gate;     // output gate logits [T, P]
};
// Constant-size recurrent state of one KDA layer.
struct KdaState {
  Buf conv;  // [3, P·(K-1)]: q, k, v windows of raw inputs, oldest first
  Buf S;     // [heads, dk·dk]: per head [dk, dv], rows indexed by key channel
};
// What a recorded pass keeps per row so that kda_replay can re-run the recurrence bit for bit.
struct KdaRecord {
  Buf raw;   // [rows, 3P] raw q | k | v projections (for the conv windows)
  Buf k, v;  // [rows, P] after conv and l2norm
  Buf g;     // [rows, P] log-decay
  Buf beta;  // [rows, heads] after σ
};

// Multi-head latent attention in its absorbed form over a compact cache (latent + k_pe per
// position): kv_b's key rows are folded into the query, its value rows expand the attended latent.
struct MlaOp {
  int64_t heads = 0, nope = 0, rope = 0, v_dim = 0, kv_rank = 0;
  float scale = 1.0f;
  bool causal = true;  // row t sees positions < visible0 + t + 1; else every row sees < visible0
  const Weight* kv_b = nullptr;  // [heads·(nope + v_dim), kv_rank], BF16 or F32 (FP8: mla_reads_fp8())
};

// Grouped-query attention over a KV cache.
struct GqaOp {
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  float scale = 1.0f;
  int64_t window = 0;  // > 0: a row at position p sees positions p-window+1..p (sliding window)
  Vec sinks;           // optional per-head learned sink logits (gpt-oss): an extra softmax term
};

// Rotary embedding: pairs rotate by angle position·inv_freq[i].
enum class RopePairs : uint8_t { Half /* i with i + d/2 (rotate_half) */, Interleaved /* 2i with 2i+1 */ };
struct RopeSpec {
  std::vector<double> inv_freq;  // [d/2]
  bool f64_angles = false;       // angles and cos/sin in double, then rounded (else fp32 throughout)
  float magnitude = 1.0f;        // cos and sin are scaled by it (YaRN's mscale)
};

enum class RouterScore : uint8_t {
  Sigmoid,      // σ(logit); choice adds the correction bias (DeepSeek-V3, Kimi)
  Softmax,      // softmax over experts, then top-k (Qwen3-MoE)
  TopkSoftmax,  // top-k of the logits, then softmax over the k chosen (gpt-oss)
};
struct RouterOp {
  RouterScore score = RouterScore::Sigmoid;
  int64_t experts = 0, top_k = 0;
  int64_t groups = 1, topk_groups = 1;  // grouped top-k: keep the best groups (sum of their two best choices)
  Vec correction_bias;                  // optional [experts], added to the choice score only
  bool renormalize = true;              // weights divided by their sum (+ renorm_eps)
  float renorm_eps = 1e-20f;
  float scaling = 1.0f;                 // routed_scaling_factor
};

struct ExpertsOp {
  Activation act;
  int64_t top_k = 1;  // slots per row: member m is row m / top_k
};

// ---- the device ----

class Device {
 public:
  virtual ~Device() = default;
  // "cpu/avx512", "cuda:0/sm_90a NVIDIA H200": printed with every result.
  virtual std::string name() const = 0;
  virtual Place place() const = 0;
  // Floating-point operations of the products, attention and recurrences run so far (a multiply-add
  // counts two; element-wise ops are not counted): the work a FLOP floor divides by a peak rate. 0
  // where the device does not count.
  virtual uint64_t flops() const { return 0; }

  // Memory. alloc() is for what outlives a pass (states, caches, records): zeroed, freed by free().
  // Scratch is a bump arena: scratch() takes from it, scratch_reset(mark) returns everything taken
  // since scratch_mark(). The arena keeps its capacity, so after the first pass of a given size no
  // pass allocates (grows only when a pass needs more than any before).
  virtual Buf alloc(BufType t, int64_t rows, int64_t cols) = 0;
  virtual void free(Buf b) = 0;
  virtual Buf scratch(BufType t, int64_t rows, int64_t cols) = 0;
  virtual size_t scratch_mark() const = 0;
  virtual void scratch_reset(size_t mark) = 0;
  // The furthest the scratch cursor has gone (bytes) since reset_scratch_peak(): what the passes
  // in between needed at most (the targets' pass_bytes_per_row is checked against it).
  virtual size_t scratch_peak() const = 0;
  virtual void reset_scratch_peak() = 0;
  // A device with memory of its own reports how much of it is free now and its total; the CPU
  // device, which works in host memory, reports zeros.
  struct MemoryInfo {
    size_t free = 0, total = 0;
  };
  virtual MemoryInfo memory() const { return {}; }

  // Weights. keep() makes a host weight or parameter usable by this device: the CPU returns a view
  // of the host bytes (which must outlive the device's use), a GPU copies them into its memory.
  virtual Weight keep(const Weight& host) = 0;
  virtual Vec keep(std::span<const float> host) = 0;

  // Transfers. Host buffers are dense [rows, cols]. upload is queued behind earlier work;
  // download waits for it (a sync point).
  virtual void upload(Buf dst, const void* host) = 0;
  virtual void download(const Buf& src, void* host) = 0;
  virtual void copy(Buf dst, const Buf& src) = 0;
  virtual void fill(Buf dst, float value) = 0;

  // Order. Work runs in issue order on the device's compute queue. fence() marks the queue (what
  // was issued before it is done when it has passed); wait() makes later work wait for a fence of
  // another queue (an expert's copy); finish() blocks the host until all issued work is done.
  virtual Fence fence() = 0;
  virtual void wait(Fence f) = 0;
  virtual void finish() = 0;

  // The expert tier's device side (store/device_tier.h keeps routed experts in device memory).
  // A device with memory of its own implements these; the CPU device implements them on host
  // memory (an emulated accelerator: its copies are memcpy, its fences have always passed), which
  // is how the tier runs in tests on machines without a GPU.
  // Device bytes that outlive passes, or null when they do not fit (never a failure).
  virtual void* alloc_bytes(size_t /*bytes*/) { return nullptr; }
  virtual void free_bytes(void* /*p*/) {}
  // Registers host memory with the copy engine (page-locked: copies from it run at the link's rate
  // and never wait for the compute queue). False where there is nothing to register or the system
  // refused (the copies then go through pageable memory: slower, the same bytes).
  virtual bool pin_host(void* /*p*/, size_t /*bytes*/) { return false; }
  virtual void unpin_host(void* /*p*/) {}
  // Queues copies of host bytes into device bytes (from alloc_bytes) on the copy queue, after
  // `after` has passed (the fence of the destinations' previous readers). The returned fence passes
  // once every piece is there; the host bytes must stay unchanged until it has.
  struct CopyPiece {
    void* dst;
    const void* src;
    size_t bytes;
  };
  virtual Fence copy_in(std::span<const CopyPiece> pieces, Fence after) = 0;
  // Waits on the host until f has passed.
  virtual void sync(Fence /*f*/) {}
  // Whether f has passed, without waiting.
  virtual bool passed(Fence /*f*/) { return true; }

  // ---- ops ----
  // Products of several weights over one input x [T, in]: one launch, outputs independent.
  virtual void linear(const Buf& x, std::span<const LinearOut> outs) = 0;
  // Rows of a [vocab, hidden] BF16/F32 table widened into out [ids.size(), hidden]. ids are in range
  // (the caller checks: they are host data).
  virtual void embed(const Weight& table, std::span<const int32_t> ids, Buf out) = 0;
  // y = w ⊙ x·rsqrt(mean(x²) + eps) over groups of `group` columns (0: the whole row). w empty:
  // weight 1. y may alias x.
  virtual void rmsnorm(const Buf& x, const Vec& w, float eps, Buf y, int64_t group = 0) = 0;
  virtual void add(Buf y, const Buf& x) = 0;                      // y += x
  virtual void sum(Buf out, const Buf& a, const Buf& b) = 0;      // out = a + b
  virtual void mul_sigmoid(Buf y, const Buf& g) = 0;              // y ⊙= σ(g)
  virtual void gated_act(const Activation& a, Buf g, const Buf& u) = 0;  // g ← act(g, u)
  // out[t] = Σ_i x[t, i]·w[i], summed left to right (heads of a drafter).
  virtual void row_dot(const Buf& x, const Vec& w, Buf out) = 0;
  // Block AttnRes: per row, softmax over sources i of (norm ⊙ proj)·v_i / rms(v_i), then the
  // weighted sum of the raw sources.
  virtual void attn_res(std::span<const Buf> sources, const Vec& norm, const Vec& proj, float eps, Buf out) = 0;

  // KDA over the pass's T rows; reads the state from `from` and leaves the result in `to` (the
  // same state for an ordinary pass; a verify pass writes a second copy so the one before stays).
  // rec (optional) receives what kda_replay needs. out: [T, P] gated, normed heads.
  virtual void kda(const KdaOp& op, const KdaInputs& in, const KdaState& from, KdaState& to, const KdaRecord* rec,
                   Buf out) = 0;
  // Re-applies the first n recorded rows to `st` in place.
  virtual void kda_replay(const KdaOp& op, KdaState& st, const KdaRecord& rec, int64_t n) = 0;

  // Writes rows first..first+T-1 of an MLA cache from kv_a outputs kv [T, kv_rank + rope]: the
  // RMSNorm'd latent and the raw k_pe part.
  virtual void mla_cache_write(const Buf& kv, const Vec& norm, float eps, Buf latent, Buf k_pe, int64_t first) = 0;
  // Absorbed attention of q [T, heads·(nope + rope)] over cache rows; out [T, heads·v_dim].
  // mla_reads_fp8(): whether kv_b may be FP8 (each element e4m3 value × block scale in fp32, the
  // F32 widening's values); otherwise the model widens an FP8 kv_b to F32 at load.
  virtual bool mla_reads_fp8() const { return false; }
  virtual void mla_attention(const MlaOp& op, const Buf& q, const Buf& latent, const Buf& k_pe, int64_t visible0,
                             Buf out) = 0;
  // Causal GQA of q [T, heads·head_dim] at positions visible0-1+t over k/v caches
  // [capacity, kv_heads·head_dim]; out [T, heads·head_dim].
  virtual void gqa_attention(const GqaOp& op, const Buf& q, const Buf& k, const Buf& v, int64_t visible0,
                             Buf out) = 0;
  // cos/sin of rows at positions first..first+T-1: table [T, d] = cos[d/2] | sin[d/2].
  virtual void rope_table(const RopeSpec& spec, int64_t first, Buf table) = 0;
  // Rotates, in every row t and head h, the `dim` columns at h·head_stride + offset by row t of table.
  virtual void rope(const Buf& table, RopePairs pairs, Buf x, int64_t heads, int64_t head_stride, int64_t offset,
                    int64_t dim) = 0;

  // Router of T rows from logits [T, experts]: ids [T, k] (I32, descending choice, ties to the lower
  // id) and weights [T, k].
  virtual void route(const RouterOp& op, const Buf& logits, Buf ids, Buf weights) = 0;
  // Routed experts: expert i runs over the rows z[m / top_k] of its members[i] (host lists of
  // row·top_k + slot) and writes yexp[m] for each. Each expert writes only its own members' rows,
  // so which experts share a call never changes a bit.
  // groups_experts(): whether the device wants every expert of a provider group in one call (a GPU:
  // one grouped launch instead of several per expert) rather than each as soon as it is ready (the
  // CPU: computing an expert while the next one is still being read).
  virtual bool groups_experts() const { return false; }
  virtual void experts(const ExpertsOp& op, std::span<const ExpertView> views,
                       std::span<const std::span<const int64_t>> members, const Buf& z, Buf yexp) = 0;
  // out[t] = Σ_i weights[t, i]·yexp[t·k + i] in route order (i = 0..k-1).
  virtual void combine(const Buf& yexp, const Buf& weights, Buf out) = 0;
};

// Frees a state allocation with its device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device& d, BufType t, int64_t rows, int64_t cols) : dev_(&d), buf_(d.alloc(t, rows, cols)) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept : dev_(o.dev_), buf_(o.buf_) { o.buf_ = {}; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }
  void reset();
  const Buf& buf() const { return buf_; }
  bool empty() const { return buf_.empty(); }

 private:
  Device* dev_ = nullptr;
  Buf buf_;
};

// Returns the scratch taken inside a scope.
class ScratchScope {
 public:
  explicit ScratchScope(Device& d) : dev_(d), mark_(d.scratch_mark()) {}
  ~ScratchScope() { dev_.scratch_reset(mark_); }
  ScratchScope(const ScratchScope&) = delete;
  ScratchScope& operator=(const ScratchScope&) = delete;

 private:
  Device& dev_;
  size_t mark_;
};

// One row of a RoPE table on the host, [cos(d/2) | sin(d/2)] at `position`: the one definition of
// the angles every device's rope_table() uses (positions are host data), so the bits are the same
// on every device.
void rope_table_row(const RopeSpec& spec, int64_t position, float* row);

// Opens a device by name: "cpu" (best ISA, or SLUICE_ISA's), "cpu:scalar|avx2|avx512", "cuda[:N]",
// "cuda-ref[:N]" (each backend's spellings). Throws sluice::Error naming what is unavailable.
std::unique_ptr<Device> open_device(std::string_view spec);
// The process-wide CPU device that follows the active ISA (device::set_active_isa).
Device& cpu_device();
// Names of the devices this build and machine can open ("cpu:scalar", "cpu:avx2", ...).
std::vector<std::string> available_devices();

// A device backend as listings, help and machine facts see it, so that nothing outside device/
// includes a backend's header or spells its names: the CPU (its kernel ISAs) and CUDA (its GPUs,
// or why none shows).
struct DeviceBackend {
  std::string name;                  // "cpu", "cuda"
  std::string spellings;             // the --device names it takes ("cuda[:N], cuda-ref[:N]")
  std::vector<std::string> variants;  // its kernel sets (CPU ISAs) or ISAs ("cuda", "cuda-ref")
  std::string chosen;                // the variant a bare name opens
  std::vector<std::string> found;    // one line per device on this machine, or one saying why none
  bool accelerator = false;          // its devices have their own memory
};
std::vector<DeviceBackend> device_backends();
// The --device help text: every backend's spellings.
std::string device_help();

// The registry's entry for one backend, defined in the backend's folder (device/<backend>/) and
// listed in device.cpp (one line per backend): the device-name prefixes it answers to ("cuda" and
// "cuda-ref"; a name is a prefix alone or followed by ":..."), its opener, its enumeration and its
// description.
struct Backend {
  std::vector<std::string> prefixes;
  std::unique_ptr<Device> (*open)(std::string_view spec);  // spec has one of the prefixes
  std::vector<std::string> (*devices)();                   // the names this machine can open
  DeviceBackend (*describe)();
};
// Every backend of this build, in listing order.
const std::vector<const Backend*>& backends();

}  // namespace sluice::device
