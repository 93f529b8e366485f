// The CPU device's memory (allocations, the scratch arena), transfers, products and the
// element-wise and mixing ops.
#include "device/cpu/cpu_device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace sluice::device {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMinChunk = size_t(1) << 20;

void check_same_shape(const Buf& a, const Buf& b, const char* op) {
  SLUICE_CHECK(a.rows == b.rows && a.cols == b.cols, op, ": shapes [", a.rows, ", ", a.cols, "] and [", b.rows, ", ",
               b.cols, "] differ");
}

}  // namespace

CpuDevice::CpuDevice(const Isa* isa, std::optional<Emulation> emulate) : isa_(isa), emu_(emulate) {}
CpuDevice::~CpuDevice() = default;

std::string CpuDevice::name() const { return std::string(emu_ ? "cpu-emu/" : "cpu/") + isa().name; }

Device::MemoryInfo CpuDevice::memory() const {
  if (!emu_) return {};
  return {emu_->memory_bytes - std::min(emu_used_, emu_->memory_bytes), emu_->memory_bytes};
}

Buf CpuDevice::alloc(BufType t, int64_t rows, int64_t cols) {
  SLUICE_CHECK(rows >= 0 && cols >= 0, "alloc of a [", rows, ", ", cols, "] buffer");
  auto mem = allocate_touched(std::max<size_t>(size_t(rows * cols) * 4, 4), kAlign);
  return Buf{mem.release(), rows, cols, cols, t, Place::Host};
}

void CpuDevice::free(Buf b) { AlignedFree{}(b.p); }

void* CpuDevice::alloc_bytes(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (emu_ && emu_used_ + bytes > emu_->memory_bytes) return nullptr;  // the emulated memory is full
  void* p = allocate_touched(bytes, kAlign).release();
  if (emu_) {
    emu_blocks_[p] = bytes;
    emu_used_ += bytes;
  }
  return p;
}
void CpuDevice::free_bytes(void* p) {
  if (emu_) {
    auto it = emu_blocks_.find(p);
    if (it != emu_blocks_.end()) {
      emu_used_ -= it->second;
      emu_blocks_.erase(it);
    }
  }
  AlignedFree{}(p);
}
Fence CpuDevice::copy_in(std::span<const CopyPiece> pieces, Fence) {
  size_t bytes = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const CopyPiece& c : pieces) {
    if (c.bytes) std::memcpy(c.dst, c.src, c.bytes);
    bytes += c.bytes;
  }
  if (emu_ && emu_->link_bytes_per_s > 0)  // the emulated link's time
    std::this_thread::sleep_until(t0 + std::chrono::duration<double>(double(bytes) / emu_->link_bytes_per_s));
  return {};
}

void* CpuDevice::take(size_t bytes) {
  bytes = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Chunk& c = chunks_[i];
    if (used_ >= c.base + c.size) continue;
    // The first chunk at or after the cursor with room from the cursor (or its start) on.
    const size_t at = std::max(used_, c.base);
    if (at + bytes <= c.base + c.size) {
      used_ = at + bytes;
      peak_ = std::max(peak_, used_);
      return c.mem.get() + (at - c.base);
    }
  }
  size_t total = 0;
  for (const Chunk& c : chunks_) total += c.size;
  const size_t size = std::max({bytes, total, kMinChunk});
  Chunk c{allocate_touched(size, kAlign, /*split=*/true), total, size};
  used_ = c.base + bytes;
  peak_ = std::max(peak_, used_);
  chunks_.push_back(std::move(c));
  return chunks_.back().mem.get();
}

Buf CpuDevice::scratch(BufType t, int64_t rows, int64_t cols) {
  SLUICE_CHECK(rows >= 0 && cols >= 0, "scratch of a [", rows, ", ", cols, "] buffer");
  return Buf{take(size_t(rows * cols) * 4), rows, cols, cols, t, Place::Host};
}

void CpuDevice::scratch_reset(size_t mark) {
  SLUICE_CHECK(mark <= used_, "scratch_reset past the cursor");
  used_ = mark;
  if (used_ == 0 && chunks_.size() > 1) {
    // A pass needed several chunks: merge them so the next one of its size takes one.
    size_t total = 0;
    for (const Chunk& c : chunks_) total += c.size;
    chunks_.clear();
    chunks_.push_back(Chunk{allocate_touched(total, kAlign, /*split=*/true), 0, total});
  }
}

void CpuDevice::upload(Buf dst, const void* host) {
  const char* src = static_cast<const char*>(host);
  for (int64_t r = 0; r < dst.rows; ++r) std::memcpy(row_ptr(dst, r), src + 4 * r * dst.cols, size_t(dst.cols) * 4);
}

void CpuDevice::download(const Buf& src, void* host) {
  char* dst = static_cast<char*>(host);
  for (int64_t r = 0; r < src.rows; ++r) std::memcpy(dst + 4 * r * src.cols, row_ptr(src, r), size_t(src.cols) * 4);
}

void CpuDevice::copy(Buf dst, const Buf& src) {
  check_same_shape(dst, src, "copy");
  for (int64_t r = 0; r < src.rows; ++r) std::memmove(row_ptr(dst, r), row_ptr(src, r), size_t(src.cols) * 4);
}

void CpuDevice::fill(Buf dst, float value) {
  for (int64_t r = 0; r < dst.rows; ++r) std::fill(row_ptr(dst, r), row_ptr(dst, r) + dst.cols, value);
}

void CpuDevice::linear(const Buf& x, std::span<const LinearOut> outs) {
  for (const LinearOut& o : outs) {
    const Weight& w = *o.w;
    SLUICE_CHECK(x.cols == w.cols && o.y.rows == x.rows && o.y.cols == w.rows, "linear: x [", x.rows, ", ", x.cols,
                 "], weight [", w.rows, ", ", w.cols, "], y [", o.y.rows, ", ", o.y.cols, "]");
    device::linear(isa(), w, row_ptr(x, 0), x.ld, x.rows, row_ptr(o.y, 0), o.y.ld);
    flops_ += 2 * uint64_t(w.rows) * uint64_t(w.cols) * uint64_t(x.rows);
  }
}

void CpuDevice::embed(const Weight& E, std::span<const int32_t> ids, Buf out) {
  const int64_t H = E.cols;
  SLUICE_CHECK(out.rows == int64_t(ids.size()) && out.cols == H, "embed: output shape");
  for (size_t t = 0; t < ids.size(); ++t) {
    const int32_t id = ids[t];
    SLUICE_CHECK(id >= 0 && id < E.rows, "embed: token id ", id, " outside 0..", E.rows - 1);
    float* row = row_ptr(out, int64_t(t));
    if (E.type == WeightType::BF16) {
      const uint16_t* src = static_cast<const uint16_t*>(E.data) + int64_t(id) * H;
      for (int64_t d = 0; d < H; ++d) row[d] = bf16_to_f32(src[d]);
    } else {
      SLUICE_CHECK(E.type == WeightType::F32, "embed: a ", weight_type_name(E.type), " table");
      std::memcpy(row, static_cast<const float*>(E.data) + int64_t(id) * H, size_t(H) * 4);
    }
  }
}

void CpuDevice::rmsnorm(const Buf& x, const Vec& w, float eps, Buf y, int64_t group) {
  check_same_shape(x, y, "rmsnorm");
  const int64_t gs = group > 0 ? group : x.cols;
  SLUICE_CHECK(x.cols % gs == 0 && (w.empty() || w.n == gs), "rmsnorm: ", x.cols, " columns in groups of ", gs,
               " with a weight of ", w.n);
  row_slices(x.rows, row_grain(x.cols), [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t g = 0; g < x.cols; g += gs) device::rmsnorm(row_ptr(x, r) + g, w.p, gs, eps, row_ptr(y, r) + g);
  });
}

void CpuDevice::add(Buf y, const Buf& x) {
  check_same_shape(y, x, "add");
  row_slices(y.rows, row_grain(y.cols), [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* yr = row_ptr(y, r);
      const float* xr = row_ptr(x, r);
      for (int64_t i = 0; i < y.cols; ++i) yr[i] += xr[i];
    }
  });
}

void CpuDevice::sum(Buf out, const Buf& a, const Buf& b) {
  check_same_shape(out, a, "sum");
  check_same_shape(a, b, "sum");
  row_slices(out.rows, row_grain(out.cols), [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* o = row_ptr(out, r);
      const float* ar = row_ptr(a, r);
      const float* br = row_ptr(b, r);
      for (int64_t i = 0; i < out.cols; ++i) o[i] = ar[i] + br[i];
    }
  });
}

void CpuDevice::mul_sigmoid(Buf y, const Buf& g) {
  check_same_shape(y, g, "mul_sigmoid");
  ScratchScope scope(*this);
  const int64_t grain = row_grain(y.cols);
  float* sg = temp<float>(int64_t(ThreadPool::global().size()) * y.cols);  // σ(g) of a row, per slice
  const UnaryFn unary = isa().unary;
  row_slices(y.rows, grain, [&](int64_t s, int64_t r0, int64_t r1) {
    float* sr = sg + s * y.cols;
    for (int64_t r = r0; r < r1; ++r) {
      float* yr = row_ptr(y, r);
      unary(Unary::Sigmoid, row_ptr(g, r), sr, y.cols);
      for (int64_t i = 0; i < y.cols; ++i) yr[i] *= sr[i];
    }
  });
}

// Element by element, so splitting the elements over the pool changes no bit. SiTU costs about
// three exps and five divisions per element (mathf's portable ones): at K3's expert widths one
// thread alone would spend a tenth of a decode step here (with AVX-512, 16 lanes at a time).
void gated_activation(const Isa& isa, const Activation& a, float* g, const float* u, int64_t n) {
  const GatedActFn fn = isa.gated_act;
  ThreadPool::global().parallel_for(n, 512, [&](int64_t i0, int64_t i1) { fn(a, g + i0, u + i0, i1 - i0); });
}

void CpuDevice::gated_act(const Activation& a, Buf g, const Buf& u) {
  check_same_shape(g, u, "gated_act");
  if (g.contiguous() && u.contiguous()) return gated_activation(isa(), a, row_ptr(g, 0), row_ptr(u, 0), g.rows * g.cols);
  for (int64_t r = 0; r < g.rows; ++r) gated_activation(isa(), a, row_ptr(g, r), row_ptr(u, r), g.cols);
}

void CpuDevice::row_dot(const Buf& x, const Vec& w, Buf out) {
  SLUICE_CHECK(w.n == x.cols && out.rows == x.rows && out.cols == 1, "row_dot: shapes");
  row_slices(x.rows, row_grain(x.cols), [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row_ptr(out, r)[0] = dot(row_ptr(x, r), w.p, x.cols);
  });
}

void CpuDevice::attn_res(std::span<const Buf> sources, const Vec& norm, const Vec& proj, float eps, Buf out) {
  const size_t n = sources.size();
  const int64_t T = out.rows, H = out.cols;
  SLUICE_CHECK(norm.n == H && proj.n == H, "attn_res: parameter widths");
  for (const Buf& s : sources) check_same_shape(s, out, "attn_res");
  ScratchScope scope(*this);
  float* weights = temp<float>(int64_t(ThreadPool::global().size()) * int64_t(n));  // per slice
  row_slices(T, row_grain(H * int64_t(n)), [&](int64_t s, int64_t t0, int64_t t1) {
    float* p = weights + s * int64_t(n);
    for (int64_t t = t0; t < t1; ++t) {
      for (size_t i = 0; i < n; ++i) {
        const float* v = row_ptr(sources[i], t);
        float ss = 0.0f, acc = 0.0f;
        for (int64_t d = 0; d < H; ++d) {
          ss += v[d] * v[d];
          acc += (norm.p[d] * proj.p[d]) * v[d];  // the query is norm ⊙ proj
        }
        p[i] = acc / std::sqrt(ss / float(H) + eps);
      }
      softmax(p, int64_t(n));
      float* o = row_ptr(out, t);
      std::fill(o, o + H, 0.0f);
      for (size_t i = 0; i < n; ++i) axpy(p[i], row_ptr(sources[i], t), o, H);
    }
  });
}

}  // namespace sluice::device
