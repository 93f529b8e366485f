#include "store/hybrid_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/durable_file.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "core/thread_pool.h"

namespace sluice::store {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr size_t kAlign = 4096, kPieceAlign = 64;
size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// `count` copies of one record, each packed (its pieces back to back, 64-byte aligned) at its own
// 4 KiB-aligned place in one host allocation, with a view into each.
struct Records {
  std::unique_ptr<std::byte, decltype(&std::free)> mem{nullptr, &std::free};
  size_t stride = 0, bytes = 0;  // per record: its place, its packed bytes
  std::vector<device::ExpertView> views;
};

Records copy_records(const device::ExpertView& sample, size_t count) {
  Records r;
  device::ExpertView packed = sample;
  for (device::Weight* w : {&packed.gate, &packed.up, &packed.down})
    device::for_each_piece(*w, [&](const void*&, size_t n) { r.bytes += round_up(n, kPieceAlign); });
  r.stride = round_up(r.bytes, kAlign);
  r.mem.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, r.stride * count)));
  SLUICE_CHECK(r.mem, "hybrid calibration: no memory for ", count, " copies of a ", r.bytes, "-byte expert");
  for (size_t i = 0; i < count; ++i) {
    device::ExpertView v = sample;
    std::byte* at = r.mem.get() + i * r.stride;
    for (device::Weight* w : {&v.gate, &v.up, &v.down})
      device::for_each_piece(*w, [&](const void*& member, size_t n) {
        std::memcpy(at, member, n);
        member = at;
        at += round_up(n, kPieceAlign);
      });
    v.ready = {};
    v.compute_on_host = true;
    r.views.push_back(v);
  }
  return r;
}

// The CPU device computing one row through `per_pass` records at a time, cycling over them, for
// `seconds` or, with a `copies` fence, until it has passed; returns bytes computed per second.
double cores_rate(Records& r, int per_pass, double seconds, device::Device* gpu = nullptr, device::Fence copies = {}) {
  const int64_t R = r.views[0].gate.cols;
  std::vector<float> z(size_t(per_pass) * size_t(R), 0.5f), y(z.size());
  std::vector<int64_t> rows(static_cast<size_t>(per_pass));
  std::vector<std::span<const int64_t>> members;
  for (int i = 0; i < per_pass; ++i) {
    rows[size_t(i)] = i;
    members.emplace_back(&rows[size_t(i)], 1);
  }
  const device::Buf zb{z.data(), per_pass, R, R, device::BufType::F32, device::Place::Host};
  const device::Buf yb{y.data(), per_pass, R, R, device::BufType::F32, device::Place::Host};
  device::Device& cpu = device::cpu_device();
  size_t next = 0;
  uint64_t done = 0;
  const Clock::time_point t0 = Clock::now();
  do {
    if (next + size_t(per_pass) > r.views.size()) next = 0;
    cpu.experts(device::ExpertsOp{.act = {}, .top_k = 1},
                std::span<const device::ExpertView>(r.views.data() + next, size_t(per_pass)), members, zb, yb);
    next += size_t(per_pass);
    done += uint64_t(per_pass) * r.bytes;
  } while (gpu ? !gpu->passed(copies) : since(t0) < seconds);
  return double(done) / since(t0);
}

// Queues `rounds` copies of every record into one device slot (one call, one fence).
device::Fence queue_copies(device::Device& gpu, Records& r, void* slot, size_t rounds) {
  std::vector<device::Device::CopyPiece> pieces;
  for (size_t k = 0; k < rounds; ++k)
    for (size_t i = 0; i < r.views.size(); ++i) pieces.push_back({slot, r.mem.get() + i * r.stride, r.bytes});
  return gpu.copy_in(pieces, {});
}

std::string shape(const device::Weight& w) {
  return w.empty() ? "-" : cat(device::weight_type_name(w.type), " ", w.rows, "x", w.cols);
}

}  // namespace

HybridRates measure_hybrid_rates(device::Device& gpu, const device::ExpertView& sample, int per_pass, double seconds) {
  per_pass = std::max(1, per_pass);
  size_t bytes = 0;
  for (const device::Weight* w : {&sample.gate, &sample.up, &sample.down}) bytes += device::weight_bytes(*w);
  SLUICE_CHECK(bytes > 0, "hybrid calibration: an empty expert");
  const size_t count = std::clamp<size_t>(size_t(1e9) / bytes + 1, size_t(2 * per_pass), 4096);
  Records r = copy_records(sample, count);
  const bool pinned = gpu.pin_host(r.mem.get(), r.stride * count);
  void* slot = gpu.alloc_bytes(r.bytes);
  HybridRates out;
  cores_rate(r, per_pass, seconds / 4);  // the pool's threads awake and the records' pages mapped
  out.cores = cores_rate(r, per_pass, seconds);
  if (slot) {
    // The link alone: one round to learn its rate, then as many as fill `seconds`.
    Clock::time_point t0 = Clock::now();
    gpu.sync(queue_copies(gpu, r, slot, 1));
    const double round_s = std::max(since(t0), 1e-6);
    const size_t rounds = std::max<size_t>(1, size_t(seconds / round_s));
    t0 = Clock::now();
    gpu.sync(queue_copies(gpu, r, slot, rounds));
    out.link = double(rounds * count * r.bytes) / since(t0);
    // Both at once, as a decode layer runs them: the copies queued, then the cores computing on
    // this thread (the pool's caller) until the copies have landed.
    t0 = Clock::now();
    const device::Fence f = queue_copies(gpu, r, slot, rounds);
    if (gpu.passed(f)) {
      // The copies were done when queue_copies returned (a device whose copies block the host, as
      // the emulated one's do): nothing ran beside them, so each keeps its rate alone.
      out.link_shared = out.link;
      out.cores_shared = out.cores;
    } else {
      out.cores_shared = cores_rate(r, per_pass, 0, &gpu, f);
      gpu.sync(f);
      out.link_shared = double(rounds * count * r.bytes) / since(t0);
    }
    gpu.free_bytes(slot);
  } else {
    out.cores_shared = out.cores;
  }
  if (pinned) gpu.unpin_host(r.mem.get());
  return out;
}

double hybrid_share(const HybridRates& r, double resident) {
  resident = std::clamp(resident, 0.0, 1.0);
  const double P = r.link_shared, C = r.cores_shared;
  if (!(C > 0) || resident >= 1) return 0;
  const double s = (1 - resident) * C / (std::max(P, 0.0) + C);
  return std::round(s * 100) / 100;
}

std::string hybrid_rates_text(const HybridRates& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "link %.1f GB/s, cores %.1f GB/s alone; %.1f + %.1f at once", r.link / 1e9,
                r.cores / 1e9, r.link_shared / 1e9, r.cores_shared / 1e9);
  return buf;
}

json hybrid_rates_json(const HybridRates& r) {
  return {{"link", r.link}, {"cores", r.cores}, {"link_shared", r.link_shared}, {"cores_shared", r.cores_shared}};
}

std::string hybrid_calibration_key(const std::string& device_name, const device::ExpertView& sample, int threads) {
  return cat(shape(sample.gate), " ", shape(sample.up), " ", shape(sample.down), ", ", threads, " threads on ",
             device_name);
}

std::string hybrid_calibration_path() {
  if (const char* p = std::getenv("SLUICE_CALIBRATION"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return cat(x, "/sluice/hybrid-rates.json");
  const char* home = std::getenv("HOME");
  return cat(home && *home ? home : ".", "/.cache/sluice/hybrid-rates.json");
}

namespace {
json read_file_json(const std::string& path) {
  if (!std::filesystem::exists(path)) return json::object();
  json j;
  try {
    j = json::parse(read_regular_file(path));
  } catch (const json::exception& e) {
    fail(path, ": not a hybrid calibration (", e.what(),
         "); the next streamed run on a GPU measures again and replaces it");
  }
  if (!j.is_object() || j.value("format", "") != "sluice-hybrid-rates" || !j.contains("rates") ||
      !j["rates"].is_object())
    fail(path, ": not a hybrid calibration (no \"format\": \"sluice-hybrid-rates\"); the next streamed run on a GPU ",
         "measures again and replaces it");
  return j;
}

HybridRates rates_of(const std::string& path, const std::string& key, const json& r) {
  auto rate = [&](const char* name) {
    const json* v = r.is_object() && r.contains(name) ? &r[name] : nullptr;
    if (!v || !v->is_number() || !(v->get<double>() >= 0) || !std::isfinite(v->get<double>()))
      fail(path, ": \"", key, "\": \"", name,
           "\" is not a rate in bytes/s; the next streamed run on a GPU measures again and replaces the file");
    return v->get<double>();
  };
  return {rate("link"), rate("cores"), rate("link_shared"), rate("cores_shared")};
}
}  // namespace

bool read_hybrid_calibration(const std::string& path, const std::string& key, HybridRates* out) {
  const json j = read_file_json(path);
  if (!j.contains("rates") || !j["rates"].contains(key)) return false;
  *out = rates_of(path, key, j["rates"][key]);
  return true;
}

std::vector<std::pair<std::string, HybridRates>> read_hybrid_calibrations(const std::string& path) {
  const json j = read_file_json(path);
  std::vector<std::pair<std::string, HybridRates>> out;
  if (j.contains("rates"))
    for (const auto& [key, r] : j["rates"].items()) out.emplace_back(key, rates_of(path, key, r));
  return out;
}

void write_hybrid_calibration(const std::string& path, const std::string& key, const HybridRates& r) {
  json j = read_file_json(path);
  j["format"] = "sluice-hybrid-rates";
  j["version"] = 1;
  j["rates"][key] = hybrid_rates_json(r);
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir);
  write_file_durably(path, j.dump(2) + "\n");
}

}  // namespace sluice::store
