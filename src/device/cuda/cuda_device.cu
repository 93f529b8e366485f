// The CUDA device: device memory (allocations, a scratch arena of device chunks, kept weights),
// transfers and fences on one compute stream, and the ops, which launch the reference kernels
// (ops_ref.cu) or, for weight products in the `cuda` ISA, the fast ones (gemv_fast.cu). Host data
// an op needs on the device (token ids, expert member lists, AttnRes source tables, RoPE tables)
// goes through the scratch arena, copied there from a pinned staging ring so the host never waits
// for the stream to queue it; expert views that still live in host memory are staged in scratch.
// In the `cuda` ISA the routed experts of a layer run as one grouped launch per step. The expert
// tier (store/device_tier.h) copies records into device bytes on a second stream, the copy
// stream, from host memory registered with pin_host; fences are pooled events with sequence
// numbers, so a fence kept by a tier slot for a long time still reads right after its event is
// reused.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_ops.h"

namespace sluice::device {
namespace {

using cuda::Mat;
using cuda::mat;

constexpr size_t kAlign = 256;
constexpr size_t kMinChunk = size_t(16) << 20;

class CudaDevice final : public Device {
 public:
  CudaDevice(int index, CudaIsa isa) : index_(index), reference_(isa == CudaIsa::Ref), ffma_(isa == CudaIsa::Ffma) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || index < 0 || index >= n) {
      cudaGetLastError();
      fail("device 'cuda:", index, "': ", n > 0 ? cat("this machine has GPUs 0..", n - 1) : std::string("no CUDA device"));
    }
    SLUICE_CUDA_CHECK(cudaSetDevice(index));
    cudaDeviceProp prop{};
    SLUICE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    name_ = cat(reference_ ? "cuda-ref:" : ffma_ ? "cuda-ffma:" : "cuda:", index, "/sm_", prop.major, prop.minor, " ",
                prop.name);
    SLUICE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SLUICE_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    SLUICE_CUDA_CHECK(cudaHostAlloc(&ring_, kRingBytes, cudaHostAllocDefault));
    for (cudaEvent_t& e : ring_done_) SLUICE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    const char* prof = std::getenv("SLUICE_CUDA_PROFILE");
    profile_ = prof && *prof && std::string(prof) != "0";
  }
  ~CudaDevice() override {
    cudaSetDevice(index_);
    cudaStreamSynchronize(stream_);
    cudaStreamSynchronize(copy_stream_);
    print_profile();
    for (void* p : kept_) cudaFree(p);
    for (const auto& [p, bytes] : tier_) cudaFree(p);
    for (void* p : pinned_) cudaHostUnregister(p);
    for (Chunk& c : chunks_) cudaFree(c.mem);
    for (cudaEvent_t e : ring_done_) cudaEventDestroy(e);
    for (EventSlot& f : fence_slots_) cudaEventDestroy(f.e);
    cudaFreeHost(ring_);
    cudaStreamDestroy(copy_stream_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return name_; }
  Place place() const override { return Place::Device; }

  Buf alloc(BufType t, int64_t rows, int64_t cols) override {
    SLUICE_CHECK(rows >= 0 && cols >= 0, "alloc of a [", rows, ", ", cols, "] buffer");
    const size_t bytes = std::max<size_t>(size_t(rows * cols) * 4, 4);
    void* p = device_malloc(bytes, "a state buffer");
    SLUICE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
    return Buf{p, rows, cols, cols, t, Place::Device};
  }
  void free(Buf b) override {
    cudaStreamSynchronize(stream_);  // no queued work may still read it
    cudaFree(b.p);
  }

  Buf scratch(BufType t, int64_t rows, int64_t cols) override {
    SLUICE_CHECK(rows >= 0 && cols >= 0, "scratch of a [", rows, ", ", cols, "] buffer");
    return Buf{take(size_t(rows * cols) * 4), rows, cols, cols, t, Place::Device};
  }
  size_t scratch_peak() const override { return peak_; }
  void reset_scratch_peak() override { peak_ = used_; }
  size_t scratch_mark() const override { return used_; }
  void scratch_reset(size_t mark) override {
    SLUICE_CHECK(mark <= used_, "scratch_reset past the cursor");
    used_ = mark;
    if (used_ == 0 && chunks_.size() > 1) {
      // A pass needed several chunks: merge them (once queued work is done with them).
      SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream_));
      size_t total = 0;
      for (Chunk& c : chunks_) {
        total += c.size;
        cudaFree(c.mem);
      }
      chunks_.clear();
      Chunk c{nullptr, 0, total};
      c.mem = device_malloc(total, "scratch");
      chunks_.push_back(c);
    }
  }

  MemoryInfo memory() const override {
    size_t free_b = 0, total_b = 0;
    SLUICE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return {free_b, total_b};
  }

  Weight keep(const Weight& host) override {
    if (host.place == Place::Device || host.empty()) return host;
    Weight w = host;
    w.data = copy_in(host.data, weight_data_bytes(host));
    if (host.scales) w.scales = copy_in(host.scales, weight_scale_bytes(host));
    if (host.bias) w.bias = copy_in(host.bias, weight_bias_bytes(host));
    w.place = Place::Device;
    return w;
  }
  Vec keep(std::span<const float> host) override {
    if (host.empty()) return {};
    return Vec{static_cast<const float*>(copy_in(host.data(), host.size() * 4)), int64_t(host.size())};
  }

  void upload(Buf dst, const void* host) override {
    Prof prof(*this, "upload");
    if (dst.size() == 0) return;
    const size_t bytes = size_t(dst.size()) * 4;
    const void* src = stage(host, bytes);
    SLUICE_CUDA_CHECK(cudaMemcpy2DAsync(dst.p, size_t(dst.ld) * 4, src ? src : host, size_t(dst.cols) * 4,
                                        size_t(dst.cols) * 4, size_t(dst.rows), cudaMemcpyHostToDevice, stream_));
  }
  void download(const Buf& src, void* host) override {
    Prof prof(*this, "download");
    if (src.size() == 0) return;
    SLUICE_CUDA_CHECK(cudaMemcpy2DAsync(host, size_t(src.cols) * 4, src.p, size_t(src.ld) * 4, size_t(src.cols) * 4,
                                        size_t(src.rows), cudaMemcpyDeviceToHost, stream_));
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy(Buf dst, const Buf& src) override {
    Prof prof(*this, "copy");
    SLUICE_CHECK(dst.rows == src.rows && dst.cols == src.cols, "copy: shapes differ");
    if (src.size() == 0) return;
    SLUICE_CUDA_CHECK(cudaMemcpy2DAsync(dst.p, size_t(dst.ld) * 4, src.p, size_t(src.ld) * 4, size_t(src.cols) * 4,
                                        size_t(src.rows), cudaMemcpyDeviceToDevice, stream_));
  }
  void fill(Buf dst, float value) override {
    Prof prof(*this, "fill");
    cuda::fill(stream_, mat(dst), value);
  }

  Fence fence() override { return record(stream_); }
  void wait(Fence f) override {
    if (const EventSlot* e = pending(f)) SLUICE_CUDA_CHECK(cudaStreamWaitEvent(stream_, e->e, 0));
  }
  void finish() override { SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void* alloc_bytes(size_t bytes) override {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 1)) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    tier_.emplace_back(p, bytes);
    return p;
  }
  void free_bytes(void* p) override {
    if (!p) return;
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(stream_));  // no queued work may still read it
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
    std::erase_if(tier_, [p](const auto& t) { return t.first == p; });
    cudaFree(p);
  }
  bool pin_host(void* p, size_t bytes) override {
    if (!p || !bytes) return false;
    if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    pinned_.push_back(p);
    return true;
  }
  void unpin_host(void* p) override {
    auto it = std::find(pinned_.begin(), pinned_.end(), p);
    if (it == pinned_.end()) return;
    SLUICE_CUDA_CHECK(cudaStreamSynchronize(copy_stream_));
    cudaHostUnregister(p);
    pinned_.erase(it);
  }
  Fence copy_in(std::span<const CopyPiece> pieces, Fence after) override {
    if (const EventSlot* e = pending(after)) SLUICE_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, e->e, 0));
    for (const CopyPiece& c : pieces)
      if (c.bytes) SLUICE_CUDA_CHECK(cudaMemcpyAsync(c.dst, c.src, c.bytes, cudaMemcpyHostToDevice, copy_stream_));
    return record(copy_stream_);
  }
  void sync(Fence f) override {
    if (const EventSlot* e = pending(f)) SLUICE_CUDA_CHECK(cudaEventSynchronize(e->e));
  }
  bool passed(Fence f) override {
    const EventSlot* e = pending(f);
    if (!e) return true;
    const cudaError_t r = cudaEventQuery(e->e);
    if (r == cudaErrorNotReady) return false;
    SLUICE_CUDA_CHECK(r);
    return true;
  }

  void linear(const Buf& x, std::span<const LinearOut> outs) override {
    Prof prof(*this, "linear");
    ScratchScope scope(*this);
    const void* pieces = nullptr;  // x split for the tensor cores, once for every weight that takes them
    for (const LinearOut& o : outs) {
      const Weight& w = *o.w;
      SLUICE_CHECK(x.cols == w.cols && o.y.rows == x.rows && o.y.cols == w.rows, "linear: x [", x.rows, ", ", x.cols,
                   "], weight [", w.rows, ", ", w.cols, "], y [", o.y.rows, ", ", o.y.cols, "]");
      product(on_device(w), mat(x), mat(o.y), &pieces);
    }
  }
  void embed(const Weight& table, std::span<const int32_t> ids, Buf out) override {
    Prof prof(*this, "embed");
    SLUICE_CHECK(out.rows == int64_t(ids.size()) && out.cols == table.cols, "embed: output shape");
    for (int32_t id : ids) SLUICE_CHECK(id >= 0 && id < table.rows, "embed: token id ", id, " outside 0..", table.rows - 1);
    ScratchScope scope(*this);
    const int32_t* d_ids = put(ids.data(), ids.size());
    cuda::embed(stream_, on_device(table), d_ids, mat(out));
  }
  void rmsnorm(const Buf& x, const Vec& w, float eps, Buf y, int64_t group) override {
    Prof prof(*this, "rmsnorm");
    const int64_t gs = group > 0 ? group : x.cols;
    SLUICE_CHECK(x.rows == y.rows && x.cols == y.cols && x.cols % gs == 0 && (w.empty() || w.n == gs), "rmsnorm: shapes");
    (reference_ ? cuda::rmsnorm : cuda::rmsnorm_fast)(stream_, mat(x), w.p, eps, mat(y), gs);
  }
  void add(Buf y, const Buf& x) override {
    Prof prof(*this, "add");
    cuda::add(stream_, mat(y), mat(x));
  }
  void sum(Buf out, const Buf& a, const Buf& b) override {
    Prof prof(*this, "sum");
    cuda::sum(stream_, mat(out), mat(a), mat(b));
  }
  void mul_sigmoid(Buf y, const Buf& g) override {
    Prof prof(*this, "mul_sigmoid");
    cuda::mul_sigmoid(stream_, mat(y), mat(g));
  }
  void gated_act(const Activation& a, Buf g, const Buf& u) override {
    Prof prof(*this, "gated_act");
    cuda::gated_act(stream_, a, mat(g), mat(u));
  }
  void row_dot(const Buf& x, const Vec& w, Buf out) override {
    Prof prof(*this, "row_dot");
    SLUICE_CHECK(w.n == x.cols && out.rows == x.rows && out.cols == 1, "row_dot: shapes");
    cuda::row_dot(stream_, mat(x), w.p, mat(out));
  }
  void attn_res(std::span<const Buf> sources, const Vec& norm, const Vec& proj, float eps, Buf out) override {
    Prof prof(*this, "attn_res");
    SLUICE_CHECK(norm.n == out.cols && proj.n == out.cols, "attn_res: parameter widths");
    SLUICE_CHECK(sources.size() <= 128, "attn_res: ", sources.size(), " sources above the CUDA kernel's 128");
    ScratchScope scope(*this);
    std::vector<Mat>& mats = mats_;
    mats.clear();
    for (const Buf& b : sources) mats.push_back(mat(b));
    const Mat* d = put(mats.data(), mats.size());
    float* p = static_cast<float*>(take(size_t(out.rows) * sources.size() * 4));
    (reference_ ? cuda::attn_res : cuda::attn_res_fast)(stream_, d, int(sources.size()), norm.p, proj.p, eps, mat(out),
                                                        p);
  }

  void kda(const KdaOp& op, const KdaInputs& in, const KdaState& from, KdaState& to, const KdaRecord* rec,
           Buf out) override {
    Prof prof(*this, "kda");
    const int64_t T = in.q.rows, P = op.dim(), dk = op.head_dim;
    for (const Buf* b : {&in.q, &in.k, &in.v, &in.f, &in.gate, static_cast<const Buf*>(&out)})
      SLUICE_CHECK(b->rows == T && b->cols == P && b->contiguous(), "kda: a [", T, ", ", P, "] input or output is not");
    SLUICE_CHECK(in.beta.rows == T && in.beta.cols == op.heads && in.beta.contiguous(), "kda: beta shape");
    for (const KdaState* st : {&from, static_cast<const KdaState*>(&to)})
      SLUICE_CHECK(st->conv.contiguous() && st->conv.size() == 3 * P * (op.conv_kernel - 1) && st->S.contiguous() &&
                       st->S.size() == op.heads * dk * dk,
                   "kda: state buffers do not match the op's shape");
    SLUICE_CHECK(dk <= 1024, "kda: head_dim ", dk, " above the CUDA kernel's 1024");
    SLUICE_CHECK(!rec || (rec->raw.rows >= T && rec->raw.cols == 3 * P), "kda: record too small");
    ScratchScope scope(*this);
    cuda::KdaBufs b{};
    b.q = ptr(in.q);
    b.k = ptr(in.k);
    b.v = ptr(in.v);
    b.f = ptr(in.f);
    b.beta = ptr(in.beta);
    b.gate = ptr(in.gate);
    b.conv_from = ptr(from.conv);
    b.S_from = ptr(from.S);
    b.conv_to = ptr(to.conv);
    b.S_to = ptr(to.S);
    if (rec) {
      b.rec_raw = ptr(rec->raw);
      b.rec_k = ptr(rec->k);
      b.rec_v = ptr(rec->v);
      b.rec_g = ptr(rec->g);
      b.rec_beta = ptr(rec->beta);
      b.rec_ld_raw = rec->raw.ld;
      b.rec_ld = rec->k.ld;
    }
    b.out = ptr(out);
    b.qc = static_cast<float*>(take(size_t(T * P) * 4));
    b.kc = static_cast<float*>(take(size_t(T * P) * 4));
    b.vc = static_cast<float*>(take(size_t(T * P) * 4));
    b.g = static_cast<float*>(take(size_t(T * P) * 4));
    b.beta_s = static_cast<float*>(take(size_t(T * op.heads) * 4));
    cuda::kda(stream_, op, T, b);
  }
  void kda_replay(const KdaOp& op, KdaState& st, const KdaRecord& rec, int64_t n) override {
    Prof prof(*this, "kda_replay");
    SLUICE_CHECK(n >= 0 && n <= rec.raw.rows, "kda_replay of ", n, " rows from a record of ", rec.raw.rows);
    cuda::KdaReplayBufs b{ptr(st.conv), ptr(st.S), ptr(rec.raw), ptr(rec.k), ptr(rec.v), ptr(rec.g), ptr(rec.beta),
                          rec.raw.ld, rec.k.ld, rec.beta.ld};
    cuda::kda_replay(stream_, op, n, b);
  }

  void mla_cache_write(const Buf& kv, const Vec& norm, float eps, Buf latent, Buf k_pe, int64_t first) override {
    Prof prof(*this, "mla_cache_write");
    SLUICE_CHECK(kv.cols == latent.cols + k_pe.cols && norm.n == latent.cols && first + kv.rows <= latent.rows,
                 "mla_cache_write: shapes");
    cuda::mla_cache_write(stream_, mat(kv), norm.p, eps, mat(latent), mat(k_pe), first);
  }
  void mla_attention(const MlaOp& op, const Buf& q, const Buf& latent, const Buf& k_pe, int64_t visible0,
                     Buf out) override {
    Prof prof(*this, "mla_attention");
    const int64_t n_max = visible0 + (op.causal ? q.rows - 1 : 0);
    SLUICE_CHECK(q.cols == op.heads * (op.nope + op.rope) && out.cols == op.heads * op.v_dim && n_max <= latent.rows,
                 "mla_attention: shapes");
    ScratchScope scope(*this);
    MlaOp dop = op;
    const Weight kv_b = on_device(*op.kv_b);
    dop.kv_b = &kv_b;
    float* s = static_cast<float*>(take(size_t(q.rows * op.heads * (2 * op.kv_rank + n_max)) * 4));
    cuda::mla_attention(stream_, dop, mat(q), mat(latent), mat(k_pe), visible0, mat(out), s);
  }
  void gqa_attention(const GqaOp& op, const Buf& q, const Buf& k, const Buf& v, int64_t visible0, Buf out) override {
    Prof prof(*this, "gqa_attention");
    SLUICE_CHECK(op.kv_heads > 0 && op.heads % op.kv_heads == 0 && q.cols == op.heads * op.head_dim &&
                     visible0 + q.rows - 1 <= k.rows,
                 "gqa_attention: shapes");
    ScratchScope scope(*this);
    float* s = static_cast<float*>(take(size_t(q.rows * op.heads * (visible0 + q.rows)) * 4));
    cuda::gqa_attention(stream_, op, mat(q), mat(k), mat(v), visible0, mat(out), s);
  }
  void rope_table(const RopeSpec& spec, int64_t first, Buf table) override {
    Prof prof(*this, "rope_table");
    // The table is computed on the host by rope_table_row (positions are host data), so the
    // angles are the CPU's bits.
    const int64_t half = int64_t(spec.inv_freq.size());
    SLUICE_CHECK(table.cols == 2 * half, "rope_table: ", table.cols, " columns for ", half, " frequencies");
    host_table_.resize(size_t(table.rows * table.cols));
    for (int64_t t = 0; t < table.rows; ++t) rope_table_row(spec, first + t, host_table_.data() + t * table.cols);
    upload(table, host_table_.data());  // staged: host_table_ may be refilled at once
  }
  void rope(const Buf& table, RopePairs pairs, Buf x, int64_t heads, int64_t head_stride, int64_t offset,
            int64_t dim) override {
    Prof prof(*this, "rope");
    SLUICE_CHECK(table.rows == x.rows && table.cols == dim && (heads - 1) * head_stride + offset + dim <= x.cols,
                 "rope: shapes");
    cuda::rope(stream_, mat(table), pairs, mat(x), heads, head_stride, offset, dim);
  }

  void route(const RouterOp& op, const Buf& logits, Buf ids, Buf weights) override {
    Prof prof(*this, "route");
    SLUICE_CHECK(logits.cols == op.experts && ids.cols == op.top_k && weights.cols == op.top_k && op.top_k <= op.experts &&
                     op.groups >= 1 && op.experts % op.groups == 0,
                 "route: shapes");
    ScratchScope scope(*this);
    float* s = static_cast<float*>(take(cuda::route_scratch_bytes(op, logits.rows)));
    cuda::route(stream_, op, mat(logits), mat(ids), mat(weights), s);
  }
  bool groups_experts() const override { return true; }
  void experts(const ExpertsOp& op, std::span<const ExpertView> views, std::span<const std::span<const int64_t>> members,
               const Buf& z, Buf yexp) override {
    Prof prof(*this, "experts");
    SLUICE_CHECK(views.size() == members.size(), "experts: ", views.size(), " views for ", members.size(), " member lists");
    if (!reference_ && experts_grouped(op, views, members, z, yexp)) return;
    const int64_t R = z.cols;
    for (size_t e = 0; e < views.size(); ++e) {
      const int64_t n = int64_t(members[e].size());
      if (n == 0) continue;
      ScratchScope scope(*this);
      const ExpertView& v = views[e];
      const int64_t I = v.intermediate();
      const Weight gate = on_device(v.gate), down = on_device(v.down);
      const int64_t* m = put(members[e].data(), members[e].size());
      float* g = static_cast<float*>(take(size_t(n * R) * 4));
      cuda::gather_rows(stream_, mat(z), m, n, op.top_k, g);
      const Mat G{g, n, R, R};
      const Mat h1{static_cast<float*>(take(size_t(n * I) * 4)), n, I, I};
      const Mat y{static_cast<float*>(take(size_t(n * R) * 4)), n, R, R};
      if (v.gate_up_interleaved) {
        const Mat gu{static_cast<float*>(take(size_t(n * 2 * I) * 4)), n, 2 * I, 2 * I};
        product(gate, G, gu);
        cuda::gated_act_pairs(stream_, op.act, gu, h1);
      } else {
        const Mat h3{static_cast<float*>(take(size_t(n * I) * 4)), n, I, I};
        const void* pieces = nullptr;  // G split once for both
        product(gate, G, h1, &pieces);
        product(on_device(v.up), G, h3, &pieces);
        cuda::gated_act(stream_, op.act, h1, h3);
      }
      product(down, h1, y);
      cuda::scatter_rows(stream_, y.p, n, m, mat(yexp));
    }
  }
  void combine(const Buf& yexp, const Buf& weights, Buf out) override {
    Prof prof(*this, "combine");
    SLUICE_CHECK(yexp.rows == out.rows * weights.cols && yexp.cols == out.cols, "combine: shapes");
    cuda::combine(stream_, mat(yexp), mat(weights), mat(out));
  }

 private:
  // SLUICE_CUDA_PROFILE=1: each op (the outermost, when one calls another) is bracketed by two
  // timing events and its host time is measured; the destructor prints, per op, the calls, the GPU
  // time and the host time, and the GPU's idle time between ops (the host was late to queue work).
  struct ProfRecord {
    const char* op;
    cudaEvent_t a, b;
    double host_s;
  };
  struct Prof {
    CudaDevice& d;
    const char* op;
    cudaEvent_t a = nullptr;
    std::chrono::steady_clock::time_point t0;
    Prof(CudaDevice& dev, const char* name) : d(dev), op(name) {
      if (!d.profile_ || d.prof_depth_++ > 0) return;
      a = d.prof_event();
      SLUICE_CUDA_CHECK(cudaEventRecord(a, d.stream_));
      t0 = std::chrono::steady_clock::now();
    }
    ~Prof() {
      if (!d.profile_) return;
      --d.prof_depth_;
      if (!a) return;
      cudaEvent_t b = d.prof_event();
      cudaEventRecord(b, d.stream_);
      d.prof_.push_back({op, a, b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
    }
  };
  cudaEvent_t prof_event() {
    cudaEvent_t e;
    SLUICE_CUDA_CHECK(cudaEventCreate(&e));
    return e;
  }
  void print_profile() {
    if (prof_.empty()) return;
    cudaStreamSynchronize(stream_);
    struct Row {
      int64_t calls = 0;
      double gpu_ms = 0, host_ms = 0;
    };
    std::map<std::string, Row> rows;
    double busy = 0, idle = 0, host = 0;
    for (size_t i = 0; i < prof_.size(); ++i) {
      float ms = 0, gap = 0;
      cudaEventElapsedTime(&ms, prof_[i].a, prof_[i].b);
      if (i > 0) cudaEventElapsedTime(&gap, prof_[i - 1].b, prof_[i].a);
      Row& r = rows[prof_[i].op];
      r.calls += 1;
      r.gpu_ms += ms;
      r.host_ms += prof_[i].host_s * 1e3;
      busy += ms;
      idle += gap;
      host += prof_[i].host_s * 1e3;
    }
    std::fprintf(stderr, "cuda profile (%s): %zu ops, GPU busy in ops %.2f ms, idle between ops %.2f ms (%.1f %%), host in ops %.2f ms\n",
                 name_.c_str(), prof_.size(), busy, idle, 100.0 * idle / std::max(busy + idle, 1e-9), host);
    std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) { return x.second.gpu_ms > y.second.gpu_ms; });
    std::fprintf(stderr, "  %-16s %8s %12s %12s\n", "op", "calls", "GPU ms", "host ms");
    for (const auto& [op, r] : sorted)
      std::fprintf(stderr, "  %-16s %8lld %12.3f %12.3f\n", op.c_str(), static_cast<long long>(r.calls), r.gpu_ms, r.host_ms);
    for (const ProfRecord& r : prof_) {
      cudaEventDestroy(r.a);
      cudaEventDestroy(r.b);
    }
    prof_.clear();
  }

  // The grouped path of the fast ISA: every expert with members, when they share one weight type
  // and shape the fast products take, in three launches (gather, gate·up·act, down·scatter) over a
  // device-side table. The values are those of the per-expert path bit for bit (the same products
  // in the same order, the same activation). False: the caller takes the per-expert path.
  bool experts_grouped(const ExpertsOp& op, std::span<const ExpertView> views,
                       std::span<const std::span<const int64_t>> members, const Buf& z, Buf yexp) {
    const int64_t R = z.cols;
    const ExpertView* first = nullptr;
    int64_t total = 0, max_rows = 0;
    for (size_t e = 0; e < views.size(); ++e) {
      if (members[e].empty()) continue;
      const ExpertView& v = views[e];
      if (v.gate_up_interleaved) return false;  // the per-expert path splits the pairs
      if (!first) first = &v;
      const WeightType t = first->gate.type;
      const int64_t I = first->gate.rows;
      if (v.gate.type != t || v.up.type != t || v.down.type != t || v.gate.rows != I || v.up.rows != I ||
          v.gate.cols != R || v.up.cols != R || v.down.rows != R || v.down.cols != I)
        return false;
      // The inputs are scratch (256-byte aligned): gathered rows R floats apart, h rows I apart.
      if (!cuda::fast_product_ok(v.gate, nullptr, R) || !cuda::fast_product_ok(v.up, nullptr, R) ||
          !cuda::fast_product_ok(v.down, nullptr, I))
        return false;
      total += int64_t(members[e].size());
      max_rows = std::max<int64_t>(max_rows, int64_t(members[e].size()));
    }
    if (!first) return true;
    ScratchScope scope(*this);
    const int64_t I = first->gate.rows;
    group_table_.clear();
    group_members_.clear();
    for (size_t e = 0; e < views.size(); ++e) {
      if (members[e].empty()) continue;
      const ExpertView& v = views[e];
      group_table_.push_back(cuda::ExpertGroupEntry{on_device(v.gate), on_device(v.up), on_device(v.down),
                                                    int64_t(group_members_.size()), int64_t(members[e].size())});
      group_members_.insert(group_members_.end(), members[e].begin(), members[e].end());
    }
    const cuda::ExpertGroupEntry* table = put(group_table_.data(), group_table_.size());
    const int64_t* m = put(group_members_.data(), group_members_.size());
    float* g = static_cast<float*>(take(size_t(total * R) * 4));
    float* h = static_cast<float*>(take(size_t(total * I) * 4));
    cuda::gather_rows(stream_, mat(z), m, total, op.top_k, g);
    if (on_tensor_cores(first->gate, Mat{g, total, R, R})) {
      const void* gp = split(Mat{g, total, R, R});
      void* hp = take(cuda::pieces_bytes(total, I));
      cuda::experts_mma(stream_, op.act, first->gate.type, table, int(group_table_.size()), max_rows, R, I, gp, h, hp,
                        total, m, mat(yexp));
    } else {
      cuda::experts_fast(stream_, op.act, first->gate.type, table, int(group_table_.size()), max_rows, I, g, h, m,
                         mat(yexp));
    }
    return true;
  }

  // Fences: pooled events, each with the sequence number of its latest record. A Fence is {slot,
  // sequence}; a slot is recorded again only after its event has passed, so a fence whose slot has
  // moved on has passed. At most kMaxFences are in flight (the oldest is waited for beyond that).
  struct EventSlot {
    cudaEvent_t e = nullptr;
    uint64_t seq = 0;
  };
  static constexpr size_t kMaxFences = 512;
  Fence record(cudaStream_t s) {
    while (!in_flight_.empty()) {  // return passed slots to the free list, oldest first
      EventSlot* old = in_flight_.front();
      if (in_flight_.size() >= kMaxFences) SLUICE_CUDA_CHECK(cudaEventSynchronize(old->e));
      else if (cudaEventQuery(old->e) == cudaErrorNotReady) break;
      in_flight_.pop_front();
      free_fences_.push_back(old);
    }
    EventSlot* slot;
    if (!free_fences_.empty()) {
      slot = free_fences_.back();
      free_fences_.pop_back();
    } else {
      slot = &fence_slots_.emplace_back();
      SLUICE_CUDA_CHECK(cudaEventCreateWithFlags(&slot->e, cudaEventDisableTiming));
    }
    slot->seq = ++fence_seq_;
    SLUICE_CUDA_CHECK(cudaEventRecord(slot->e, s));
    in_flight_.push_back(slot);
    return Fence{slot, slot->seq};
  }
  // The slot of a fence that may still be pending, or null when it has certainly passed.
  static const EventSlot* pending(Fence f) {
    const auto* e = static_cast<const EventSlot*>(f.impl);
    return e && e->seq == f.value ? e : nullptr;
  }

  // Host bytes copied into the pinned staging ring, or null when they are too large for it (the
  // caller then copies from pageable memory). The ring has two halves; the host moves to the other
  // half once the current one is full, after the stream has passed every copy queued from it.
  // The half in use is kept apart from the position: a half filled to its last byte leaves the
  // position at the next half's start, which must still count as the full one (deriving the half
  // from the position there skipped the fence and, at the ring's end, indexed past the events).
  static constexpr size_t kRingBytes = size_t(8) << 20;
  const void* stage(const void* host, size_t bytes) {
    constexpr size_t half = kRingBytes / 2;
    const size_t need = (bytes + kAlign - 1) / kAlign * kAlign;
    if (need > half / 4) return nullptr;
    if (ring_pos_ + need > (ring_half_ + 1) * half) {
      SLUICE_CUDA_CHECK(cudaEventRecord(ring_done_[ring_half_], stream_));
      ring_half_ = 1 - ring_half_;
      SLUICE_CUDA_CHECK(cudaEventSynchronize(ring_done_[ring_half_]));  // a never-recorded event has passed
      ring_pos_ = ring_half_ * half;
    }
    char* p = static_cast<char*>(ring_) + ring_pos_;
    std::memcpy(p, host, bytes);
    ring_pos_ += need;
    return p;
  }

  struct Chunk {
    void* mem;
    size_t base, size;
  };
  void* take(size_t bytes) {
    bytes = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    for (Chunk& c : chunks_) {
      if (used_ >= c.base + c.size) continue;
      const size_t at = std::max(used_, c.base);
      if (at + bytes <= c.base + c.size) {
        used_ = at + bytes;
        peak_ = std::max(peak_, used_);
        return static_cast<char*>(c.mem) + (at - c.base);
      }
    }
    size_t total = 0;
    for (const Chunk& c : chunks_) total += c.size;
    Chunk c{nullptr, total, std::max({bytes, total, kMinChunk})};
    c.mem = device_malloc(c.size, "scratch");
    used_ = c.base + bytes;
    peak_ = std::max(peak_, used_);
    chunks_.push_back(c);
    return c.mem;
  }
  // Host bytes in scratch, queued behind earlier work (the host copy is taken before this returns).
  template <typename T>
  const T* put(const T* host, size_t n) {
    void* d = take(n * sizeof(T));
    if (n) {
      const void* src = stage(host, n * sizeof(T));
      SLUICE_CUDA_CHECK(cudaMemcpyAsync(d, src ? src : host, n * sizeof(T), cudaMemcpyHostToDevice, stream_));
    }
    return static_cast<const T*>(d);
  }
  void* copy_in(const void* host, size_t bytes) {
    void* p = device_malloc(std::max<size_t>(bytes, 4), "weights");
    SLUICE_CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
    kept_.push_back(p);
    kept_bytes_ += bytes;
    return p;
  }
  // A weight usable by a kernel: one in host memory (an expert the store serves from RAM) is
  // staged into scratch for this call.
  Weight on_device(const Weight& w) {
    if (w.place == Place::Device) return w;
    Weight d = w;
    d.data = put(static_cast<const char*>(w.data), weight_data_bytes(w));
    if (w.scales) d.scales = put(static_cast<const char*>(w.scales), weight_scale_bytes(w));
    if (w.bias) d.bias = put(static_cast<const char*>(w.bias), weight_bias_bytes(w));
    d.place = Place::Device;
    return d;
  }
  // Device memory, or a one-line refusal with the numbers: what was asked for, what is free, and
  // how much of the GPU this device already holds (weights kept, scratch).
  void* device_malloc(size_t bytes, const char* what) {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaSuccess) return p;
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    size_t scratch = 0, tier = 0;
    for (const Chunk& c : chunks_) scratch += c.size;
    for (const auto& t : tier_) tier += t.second;
    constexpr double MiB = 1 << 20;
    fail(name_, ": out of GPU memory allocating ", what, ": ", fmt_mib(double(bytes) / MiB), " MiB asked, ",
         fmt_mib(double(free_b) / MiB), " MiB free of ", fmt_mib(double(total_b) / MiB), " MiB (this model holds ",
         fmt_mib(double(kept_bytes_) / MiB), " MiB of weights, ", fmt_mib(double(scratch) / MiB),
         " MiB of scratch and ", fmt_mib(double(tier) / MiB), " MiB of expert tier); ",
         tier ? "lower --gpu-experts-gb" : "the resident part does not fit: stream the experts (sluice prepare) or use --device cpu");
  }
  static std::string fmt_mib(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f", v);
    return b;
  }
  // y = W·x on this device's ISA. `pieces` (optional) keeps x's split for the tensor cores across
  // the products of one x: null on the first, then the split in scratch.
  void product(const Weight& w, Mat x, Mat y, const void** pieces = nullptr) {
    if (reference_) {
      cuda::linear_ref(stream_, w, x, y);
    } else if (on_tensor_cores(w, x)) {
      const void* p = pieces && *pieces ? *pieces : split(x);
      if (pieces) *pieces = p;
      cuda::linear_mma(stream_, w, p, x.rows, y);
    } else {
      cuda::linear_fast(stream_, w, x, y);
    }
  }
  // Whether the fast ISA computes W·x on the tensor cores (every format but F32, in shapes and
  // buffers the fast products take; the same answer for every pass of a model).
  bool on_tensor_cores(const Weight& w, Mat x) const {
    return !reference_ && !ffma_ && w.type != WeightType::F32 && cuda::fast_product_ok(w, x.p, x.ld);
  }
  // x split into the tensor cores' three bf16 pieces, in scratch.
  const void* split(Mat x) {
    void* p = take(cuda::pieces_bytes(x.rows, x.cols));
    cuda::split_pieces(stream_, x, p);
    return p;
  }
  // A Buf's elements for a kernel (Bufs are views: constness is the op's contract, not the Buf's).
  static float* ptr(const Buf& b) { return static_cast<float*>(b.p); }

  int index_;
  bool reference_;
  bool ffma_;  // cuda-ffma: every product on the CUDA-core kernels
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaStream_t copy_stream_ = nullptr;  // the expert tier's copies
  std::deque<EventSlot> fence_slots_;
  std::deque<EventSlot*> in_flight_;
  std::vector<EventSlot*> free_fences_;
  uint64_t fence_seq_ = 0;
  std::vector<std::pair<void*, size_t>> tier_;  // alloc_bytes
  std::vector<void*> pinned_;  // pin_host
  std::vector<Chunk> chunks_;
  size_t used_ = 0, peak_ = 0;
  std::vector<void*> kept_;
  size_t kept_bytes_ = 0;
  std::vector<Mat> mats_;
  std::vector<float> host_table_;
  bool profile_ = false;
  int prof_depth_ = 0;
  std::vector<ProfRecord> prof_;
  std::vector<cuda::ExpertGroupEntry> group_table_;
  std::vector<int64_t> group_members_;
  void* ring_ = nullptr;  // pinned
  size_t ring_pos_ = 0, ring_half_ = 0;
  cudaEvent_t ring_done_[2] = {};
};

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

std::vector<std::string> cuda_device_descriptions() {
  std::vector<std::string> out;
  for (int i = 0; i < cuda_device_count(); ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    size_t free_b = 0, total_b = p.totalGlobalMem;
    int prev = 0;
    cudaGetDevice(&prev);
    if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) cudaGetLastError();
    cudaSetDevice(prev);
    char line[320];
    std::snprintf(line, sizeof line, "cuda:%-9d %s, compute capability %d.%d (sm_%d%d), %d SMs, %.1f GiB, %.1f GiB free",
                  i, p.name, p.major, p.minor, p.major, p.minor, p.multiProcessorCount,
                  double(total_b) / double(1ull << 30), double(free_b) / double(1ull << 30));
    out.push_back(line);
  }
  return out;
}

std::unique_ptr<Device> open_cuda_device(int index, CudaIsa isa) { return std::make_unique<CudaDevice>(index, isa); }

}  // namespace sluice::device
