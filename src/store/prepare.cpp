// Expert placement, packing, home markers and bandwidth measurement.
#include "store/prepare.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "core/arena.h"
#include "core/durable_file.h"
#include "core/error.h"
#include "core/parse_number.h"
#include "core/regular_file.h"
#include "format/json_util.h"
#include "format/safetensors.h"
#include "store/home_file.h"
#include "store/resident_experts.h"

namespace sluice::store {
namespace fs = std::filesystem;

Home parse_home_spec(const std::string& spec) {
  Home h;
  h.path = spec;
  // Whatever follows the last ':' is the capacity and must be one: "PATH:abc" is a mistake, not a
  // directory named "PATH:abc" (a path that holds ':' is given with its capacity after it).
  size_t colon = spec.rfind(':');
  if (colon != std::string::npos) {
    h.path = spec.substr(0, colon);
    h.capacity_bytes = parse_byte_size(spec.substr(colon + 1), cat("--home ", spec, ": capacity"));
  }
  if (h.path.empty()) fail("--home ", spec, ": empty path");
  h.path = fs::absolute(h.path).lexically_normal().string();
  return h;
}

std::vector<std::vector<std::vector<int>>> place_experts(const ExpertBank& bank, uint64_t slot_bytes,
                                                         const PrepareOptions& opt, const Heat* heat) {
  const int H = int(opt.homes.size());
  if (H == 0) fail("prepare: give at least one --home");
  std::vector<uint64_t> free(static_cast<size_t>(H));
  for (int h = 0; h < H; ++h)
    free[size_t(h)] = opt.homes[size_t(h)].capacity_bytes ? opt.homes[size_t(h)].capacity_bytes : UINT64_MAX;
  std::vector<std::vector<std::vector<int>>> out(size_t(bank.num_layers));
  auto take = [&](int h) {
    if (free[size_t(h)] != UINT64_MAX) free[size_t(h)] -= slot_bytes;
  };
  auto fits = [&](int h) { return free[size_t(h)] >= slot_bytes; };

  if (opt.full_copy_home >= H) fail("prepare: --full-copy names home ", opt.full_copy_home, " but only ", H, " given");
  // The full copy is placed first so that its home's capacity is checked up front.
  for (int l : bank.moe_layers) {
    out[size_t(l)].resize(size_t(bank.num_experts));
    if (opt.full_copy_home < 0) continue;
    for (int64_t e = 0; e < bank.num_experts; ++e) {
      if (!fits(opt.full_copy_home))
        fail("prepare: home ", opt.homes[size_t(opt.full_copy_home)].path, " is too small for a full copy");
      take(opt.full_copy_home);
    }
  }
  // Primary: each layer's experts spread over the homes in proportion to their read rates (equal
  // shares without them), so the reads of one layer land on all drives and the drives finish
  // together: each expert goes to the home whose share would be least over-full with it, i.e. the
  // least (count + 1) / rate. The full-copy home counts as already holding them.
  std::vector<double> weight(static_cast<size_t>(H), 1.0);
  bool by_speed = int(opt.speeds.size()) == H;
  for (double v : opt.speeds) by_speed &= v > 0 && std::isfinite(v);
  if (by_speed) weight = opt.speeds;
  for (int l : bank.moe_layers) {
    std::vector<int64_t> in_layer(static_cast<size_t>(H), 0);
    for (int64_t e = 0; e < bank.num_experts; ++e) {
      int best = -1;
      double best_load = 0;
      for (int k = 0; k < H; ++k) {
        int h = int((e + l + k) % H);  // rotate the start so that ties do not all favour home 0
        if (!fits(h) && h != opt.full_copy_home) continue;
        const double load = double(in_layer[size_t(h)] + 1) / weight[size_t(h)];
        if (best < 0 || load < best_load) best = h, best_load = load;
      }
      if (best < 0)
        fail("prepare: the homes' capacities are too small for the expert bank (layer ", l, ", expert ", e, ")");
      ++in_layer[size_t(best)];
      auto& holders = out[size_t(l)][size_t(e)];
      if (best == opt.full_copy_home) {
        holders.push_back(best);
      } else {
        take(best);
        holders.push_back(best);
        if (opt.full_copy_home >= 0) holders.push_back(opt.full_copy_home);
      }
    }
  }
  // Replicas for the hottest experts, each on the fastest home that lacks it and has room (with
  // measured rates; the home with the most free space without them), so the reader's choice by
  // expected completion can send a hot expert's reads to the drive that finishes first.
  if (opt.replicate_hot > 0 && H > 1) {
    if (!heat) fail("prepare: --replicate-hot needs usage counts (--heat FILE or a model that has run before)");
    std::vector<std::pair<double, std::pair<int, int>>> ranked;
    for (int64_t l = 0; l < bank.num_layers; ++l)
      for (int64_t e = 0; e < int64_t(out[size_t(l)].size()); ++e)
        ranked.push_back({heat->get(int(l), int(e)), {int(l), int(e)}});
    std::stable_sort(ranked.begin(), ranked.end(), [](auto& a, auto& b) { return a.first > b.first; });
    size_t n = size_t(std::clamp(opt.replicate_hot, 0.0, 1.0) * double(ranked.size()));
    for (size_t i = 0; i < n; ++i) {
      auto [l, e] = ranked[i].second;
      auto& holders = out[size_t(l)][size_t(e)];
      int best = -1;
      for (int h = 0; h < H; ++h) {
        if (std::find(holders.begin(), holders.end(), h) != holders.end() || !fits(h)) continue;
        const bool better = by_speed ? weight[size_t(h)] > weight[size_t(best < 0 ? h : best)] ||
                                           (weight[size_t(h)] == weight[size_t(best < 0 ? h : best)] &&
                                            free[size_t(h)] > free[size_t(best < 0 ? h : best)])
                                     : best >= 0 && free[size_t(h)] > free[size_t(best)];
        if (best < 0 || better) best = h;
      }
      if (best < 0) continue;  // no room anywhere: the replica band ends here
      take(best);
      holders.push_back(best);
    }
  }
  return out;
}

std::vector<Part> stripe_parts(uint64_t slot_bytes, const std::vector<double>& speeds, size_t homes) {
  if (homes == 0) fail("prepare: give at least one --home");
  std::vector<double> w(homes, 1.0);
  bool by_speed = speeds.size() == homes;
  for (double v : speeds) by_speed &= v > 0 && std::isfinite(v);
  if (by_speed) w = speeds;
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  // Pages by largest remainder: each home its floor, the rest to the largest fractions.
  const uint64_t pages = slot_bytes / ExpertLayout::kAlign;
  std::vector<uint64_t> n(homes);
  std::vector<std::pair<double, size_t>> frac;
  uint64_t given = 0;
  for (size_t h = 0; h < homes; ++h) {
    const double share = double(pages) * w[h] / sum;
    n[h] = uint64_t(share);
    given += n[h];
    frac.push_back({share - double(n[h]), h});
  }
  std::stable_sort(frac.begin(), frac.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t i = 0; given < pages; ++i, ++given) n[frac[i % homes].second] += 1;
  std::vector<Part> out;
  uint64_t at = 0;
  for (size_t h = 0; h < homes; ++h) {
    out.push_back({at, n[h] * ExpertLayout::kAlign});
    at += n[h] * ExpertLayout::kAlign;
  }
  return out;
}

bool use_stripes(const ExpertBank& bank, uint64_t slot_bytes, const PrepareOptions& opt) {
  using S = PrepareOptions::Stripe;
  if (opt.stripe == S::Off) return false;
  std::string why;
  if (opt.homes.size() < 2) why = "it needs two or more homes";
  else if (opt.full_copy_home >= 0) why = "a striped record has no whole copy to put on --full-copy's home";
  else if (opt.replicate_hot > 0) why = "replicas (--replicate-hot) are of whole records";
  if (!why.empty()) {
    if (opt.stripe == S::On) fail("prepare: --stripe on: ", why);
    return false;
  }
  // Every home's share of a record must fit in its capacity.
  const std::vector<Part> parts = stripe_parts(slot_bytes, opt.speeds, opt.homes.size());
  const uint64_t records = uint64_t(bank.moe_layers.size()) * uint64_t(bank.num_experts);
  for (size_t h = 0; h < parts.size(); ++h) {
    const uint64_t cap = opt.homes[h].capacity_bytes;
    if (cap && parts[h].length * records > cap) {
      if (opt.stripe == S::On)
        fail("prepare: --stripe on: home ", opt.homes[h].path, " is too small for its share of every record (",
             parts[h].length * records, " bytes, capacity ", cap, ")");
      return false;
    }
  }
  if (opt.stripe == S::On) return true;
  for (const Part& p : parts)
    if (p.length < kMinStripePart) return false;
  return true;
}

RecordPlacement place_records(const ExpertBank& bank, uint64_t slot_bytes, const PrepareOptions& opt,
                              const Heat* heat) {
  RecordPlacement out;
  out.part_on.assign(opt.homes.size(), Part{0, slot_bytes});
  if (!use_stripes(bank, slot_bytes, opt)) {
    out.holders = place_experts(bank, slot_bytes, opt, heat);
    return out;
  }
  out.part_on = stripe_parts(slot_bytes, opt.speeds, opt.homes.size());
  std::vector<int> all;
  for (size_t h = 0; h < out.part_on.size(); ++h)
    if (out.part_on[h].length) all.push_back(int(h));
  out.holders.resize(size_t(bank.num_layers));
  for (int l : bank.moe_layers) out.holders[size_t(l)].assign(size_t(bank.num_experts), all);
  return out;
}

std::vector<double> measured_drive_speeds(const std::vector<Home>& homes) {
  std::vector<double> out;
  for (const Home& h : homes) {
    const std::string path = h.path + "/sluice-drive.json";
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) return {};
    try {
      nlohmann::json j = format::read_json_file(path, 1 << 20);
      double v = format::get_number(j, "read_bytes_per_s", path);
      if (!(v > 0)) return {};
      out.push_back(v);
    } catch (const Error&) {
      return {};
    }
  }
  return out;
}

namespace {

std::string layer_file(int64_t layer) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "L%03lld.bin", (long long)layer);
  return buf;
}

std::string read_text(const std::string& path) { return read_regular_file(path); }

}  // namespace

std::string expert_file(const std::string& model_id, int64_t layer) { return model_id + "/" + layer_file(layer); }

bool check_home(const Home& home, const std::string& model_id) {
  std::string marker = home.path + "/sluice-home.json";
  if (!fs::exists(marker)) return false;
  require_regular_if_exists(marker);
  nlohmann::json j = format::read_json_file(marker);
  std::string other = format::get_string_or(j, "model_id", "", marker);
  if (other != model_id)
    fail("home ", home.path, " already holds the experts of another model (model_id ", other, "; this model is ",
         model_id, "); use an empty directory per model");
  return true;
}

void claim_home(const Home& home, const std::string& model_id) {
  if (check_home(home, model_id)) return;
  fs::create_directories(home.path);
  std::string marker = home.path + "/sluice-home.json";
  nlohmann::json j = {{"format", "sluice-home"}, {"version", 1}, {"model_id", model_id}};
  write_file_durably(marker, j.dump(2) + "\n");
}

namespace {

// Whether the `length` bytes at `offset` of fd are a record (or part of one) with checksum `sum`
// (read into buf).
bool read_record(int fd, uint64_t offset, size_t length, uint64_t sum, std::byte* buf) {
  size_t got = 0;
  while (got < length) {
    ssize_t r = ::pread(fd, buf + got, length - got, off_t(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += size_t(r);
  }
  return got == length && XXH3_64bits(buf, length) == sum;
}

// Whether the file at `path` holds exactly the pieces of records `held` (in order), each `length`
// bytes, with the checksums `sums` (one per held record): a file an earlier prepare finished is
// kept only when it holds what this one would write. The size alone does not say it: a prepare
// onto the same homes in another order, or with other heat, gives a home other experts in a file
// of the same size.
bool holds_records(const std::string& path, const std::vector<int64_t>& held, const std::vector<uint64_t>& sums,
                   size_t length, std::byte* buf) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) != held.size() * length || ec) return false;
  std::string why;
  int fd = open_regular(path, O_RDONLY, why);
  if (fd < 0) return false;
  bool same = true;
  for (size_t i = 0; i < held.size() && same; ++i) same = read_record(fd, i * length, length, sums[i], buf);
  ::close(fd);
  return same;
}

// The records of one layer of an existing install, read from its homes: every file the old
// manifest names for the layer is opened once, before anything of the layer is replaced, so a
// rename over a path never changes what is read.
class OldLayer {
 public:
  OldLayer(const Manifest& old, int64_t layer) : old_(old), layer_(layer) {
    for (const auto& hs : old.holders[size_t(layer)])
      for (const Holder& h : hs) {
        const std::string path = old.homes[size_t(h.home)].path + "/" + h.file;
        if (!h.local || fds_.count(path)) continue;
        std::string why;
        fds_[path] = open_regular(path, O_RDONLY, why);  // -1: that copy is missing; others may do
      }
  }
  ~OldLayer() {
    for (auto& [path, fd] : fds_)
      if (fd >= 0) ::close(fd);
  }
  OldLayer(const OldLayer&) = delete;
  OldLayer& operator=(const OldLayer&) = delete;
  // The checksum of expert e's whole record, when the old install holds a whole copy of it.
  std::optional<uint64_t> sum(int64_t e) const {
    for (const Holder& h : old_.holders[size_t(layer_)][size_t(e)])
      if (h.local && h.at == 0 && h.length == old_.layout.slot_bytes) return h.xxh3;
    return std::nullopt;
  }
  // Fills buf with expert e's record, each part from the first copy of it whose checksum matches.
  void read(int64_t e, std::byte* buf) const {
    const auto& hs = old_.holders[size_t(layer_)][size_t(e)];
    for (const Part& p : parts_of(hs)) {
      bool local = false, got = false;
      for (const Holder& h : hs) {
        if (h.at != p.at || !h.local) continue;
        local = true;
        auto it = fds_.find(old_.homes[size_t(h.home)].path + "/" + h.file);
        if (it != fds_.end() && it->second >= 0 && read_record(it->second, h.offset, h.length, h.xxh3, buf + h.at)) {
          got = true;
          break;
        }
      }
      if (!local)
        fail("--rebalance: expert ", e, " of layer ", layer_, " has no copy on the homes yet (a streamed install ",
             "still fetching it); run prepare without --rebalance");
      if (!got)
        fail("--rebalance: no good copy of expert ", e, " of layer ", layer_,
             " on the current homes (run prepare without --rebalance to read it from the checkpoint again)");
    }
  }

 private:
  const Manifest& old_;
  int64_t layer_;
  std::map<std::string, int> fds_;
};

}  // namespace

double measure_read_bandwidth(const std::string& home, const std::vector<std::string>& files, uint64_t max_bytes) {
  const size_t chunk = 1 << 20;
  auto buf = allocate_touched(chunk, 4096);
  uint64_t done = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& f : files) {
    std::string why;
    int fd = open_home_file(home, f, O_RDONLY | O_DIRECT, why);
    if (fd < 0) continue;
    for (off_t off = 0; done < max_bytes; off += off_t(chunk)) {
      ssize_t r = ::pread(fd, buf.get(), chunk, off);
      if (r <= 0) break;
      done += uint64_t(r);
    }
    ::close(fd);
    if (done >= max_bytes) break;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return done && s > 0 ? double(done) / s : 0.0;
}

Manifest prepare_experts(const std::string& model_dir, const ExpertBank& bank, const PrepareOptions& opt_in) {
  const std::string config_text = read_text(model_dir + "/config.json");
  if (bank.empty()) fail(model_dir, ": the model has no routed experts to prepare");
  const ExpertLayout& layout = bank.layout;
  const std::string id = model_identity(config_text, layout);
  PrepareOptions opt = opt_in;
  std::optional<Manifest> old;
  std::optional<format::TensorSet> ts;
  if (opt.rebalance) {
    const std::string mp = manifest_path(model_dir);
    if (!fs::exists(mp)) fail(model_dir, ": --rebalance needs a prepared install (no ", mp, "); run prepare first");
    old = read_manifest(mp, bank, id);
    if (opt.homes.empty())
      for (const Home& h : old->homes) opt.homes.push_back({h.path, h.capacity_bytes, 0});
  } else {
    ts = format::TensorSet::open_dir(model_dir);
  }
  if (opt.homes.empty()) fail("prepare: no homes given");
  // Every file (home path / relative name) a manifest's holders name.
  auto files_of = [](const Manifest& m) {
    std::set<std::string> out;
    for (const auto& layer : m.holders)
      for (const auto& hs : layer)
        for (const Holder& h : hs) out.insert(m.homes[size_t(h.home)].path + "/" + h.file);
    return out;
  };
  const std::set<std::string> old_files = old ? files_of(*old) : std::set<std::string>{};

  Heat heat(bank.num_layers, bank.num_experts);
  bool have_heat = false;
  std::string heat_file = opt.heat_file.empty() ? heat_path(model_dir) : opt.heat_file;
  if (fs::exists(heat_file)) {
    heat.load(heat_file);
    have_heat = true;
  } else if (!opt.heat_file.empty()) {
    fail("--heat ", opt.heat_file, ": no such file");
  }
  PrepareOptions placed = opt;
  if (placed.speeds.empty()) placed.speeds = measured_drive_speeds(opt.homes);
  const size_t H = opt.homes.size();
  auto [placement, part_on] = place_records(bank, layout.slot_bytes, placed, have_heat ? &heat : nullptr);
  for (const Home& h : opt.homes) claim_home(h, id);

  Manifest m;
  m.model_id = id;
  m.layout = layout;
  m.num_layers = bank.num_layers;
  m.num_experts = bank.num_experts;
  m.homes = opt.homes;
  m.holders.resize(size_t(bank.num_layers));

  uint64_t total = 0, done = 0;
  for (const auto& layer : placement)
    for (const auto& hs : layer)
      for (int h : hs) total += part_on[size_t(h)].length;
  auto record = allocate_touched(layout.slot_bytes, 4096);
  auto scratch = allocate_touched(layout.slot_bytes, 4096);
  for (int64_t l = 0; l < bank.num_layers; ++l) {
    if (placement[size_t(l)].empty()) continue;
    m.holders[size_t(l)].resize(size_t(bank.num_experts));
    std::optional<OldLayer> from;
    if (old) from.emplace(*old, l);
    auto fill_record = [&](int64_t e) {
      if (from) return from->read(e, record.get());
      auto seg = expert_segments(bank, *ts, int(l), int(e));
      layout.validate(seg, cat(model_dir, ": expert ", e, " of layer ", l));
      std::memset(record.get(), 0, layout.slot_bytes);
      for (size_t i = 0; i < seg.size(); ++i)
        std::memcpy(record.get() + layout.segments[i].offset, seg[i], layout.segments[i].bytes);
    };
    // Checksums of the parts this layer's records are cut into (one per home), each record read
    // once: a whole record's is the old manifest's when rebalancing, else it is computed.
    std::vector<std::vector<uint64_t>> sums(static_cast<size_t>(bank.num_experts), std::vector<uint64_t>(H));
    for (int64_t e = 0; e < bank.num_experts; ++e) {
      const bool whole = part_on[0].length == layout.slot_bytes;
      std::optional<uint64_t> known = whole && from ? from->sum(e) : std::nullopt;
      if (!known) fill_record(e);
      for (size_t h = 0; h < H; ++h)
        sums[size_t(e)][h] = known ? *known : XXH3_64bits(record.get() + part_on[h].at, part_on[h].length);
    }
    // Per home: the records it holds of this layer, and the file they go to.
    struct Out {
      std::vector<int64_t> held;
      std::vector<uint64_t> sums;
      std::string rel, path;
      std::optional<PendingFile> file;  // while the file is being written (removed if never committed)
    };
    std::vector<Out> outs(H);
    uint64_t written = 0, layer_bytes = 0;
    try {
      for (size_t h = 0; h < H; ++h) {
        Out& o = outs[h];
        for (int64_t e = 0; e < bank.num_experts; ++e) {
          const auto& hs = placement[size_t(l)][size_t(e)];
          if (std::find(hs.begin(), hs.end(), int(h)) == hs.end()) continue;
          o.held.push_back(e);
          o.sums.push_back(sums[size_t(e)][h]);
        }
        if (o.held.empty()) continue;
        o.rel = expert_file(id, l);
        const std::string& home_path = opt.homes[h].path;
        bool same = false;
        if (old) {
          // A file the old manifest uses stays as it is until the new manifest is written: kept if
          // it holds exactly these records, else the layer goes to the other of two names.
          const std::string alt = o.rel.substr(0, o.rel.size() - 4) + ".b.bin";
          const std::string cur = old_files.count(home_path + "/" + o.rel) ? o.rel
                                  : old_files.count(home_path + "/" + alt) ? alt
                                                                           : "";
          if (!cur.empty()) {
            same = holds_records(home_path + "/" + cur, o.held, o.sums, part_on[h].length, scratch.get());
            o.rel = same ? cur : (cur == o.rel ? alt : o.rel);
          }
        }
        o.path = home_path + "/" + o.rel;
        if (same || holds_records(o.path, o.held, o.sums, part_on[h].length, scratch.get())) continue;
        fs::create_directories(fs::path(o.path).parent_path());
        o.file.emplace(o.path, o.path + ".tmp");
      }
      // Each record is read once and its parts written to the homes that need them (in expert
      // order, which is each file's order).
      for (size_t h = 0; h < H; ++h) layer_bytes += outs[h].held.size() * part_on[h].length;
      for (int64_t e = 0; e < bank.num_experts; ++e) {
        bool need = false;
        for (const Out& o : outs) need |= o.file && std::binary_search(o.held.begin(), o.held.end(), e);
        if (!need) continue;
        fill_record(e);
        for (size_t h = 0; h < H; ++h)
          if (outs[h].file && std::binary_search(outs[h].held.begin(), outs[h].held.end(), e)) {
            write_all(outs[h].file->fd(), record.get() + part_on[h].at, part_on[h].length, outs[h].file->tmp());
            written += part_on[h].length;
          }
        if (opt.progress && written < layer_bytes) opt.progress(done + written, total, cat("layer ", l));
      }
      for (Out& o : outs) {
        if (!o.file) continue;
        o.file->commit();
        o.file.reset();
      }
    } catch (...) {
      outs.clear();  // the files not committed remove their temporaries
      throw;
    }
    for (size_t h = 0; h < H; ++h) {
      const Out& o = outs[h];
      for (size_t i = 0; i < o.held.size(); ++i)
        m.holders[size_t(l)][size_t(o.held[i])].push_back(
            Holder{int(h), o.rel, i * part_on[h].length, part_on[h].length, o.sums[i], true, part_on[h].at});
    }
    done += layer_bytes;
    if (opt.progress) opt.progress(done, total, cat("layer ", l));
    for (int64_t e = 0; e < bank.num_experts; ++e) {
      auto& hs = m.holders[size_t(l)][size_t(e)];
      const auto& order = placement[size_t(l)][size_t(e)];
      // Keep the placement's order (primary first; a striped record's parts in record order).
      std::stable_sort(hs.begin(), hs.end(), [&](const Holder& a, const Holder& b) {
        return std::find(order.begin(), order.end(), a.home) < std::find(order.begin(), order.end(), b.home);
      });
    }
  }
  // The rates placement used (from `sluice bench drives`: record-sized random reads, every home at
  // once) go into the manifest; prepare's own sequential measure is only for homes without them.
  const bool rates_known = placed.speeds.size() == m.homes.size();
  if (rates_known)
    for (size_t h = 0; h < m.homes.size(); ++h) m.homes[h].read_bytes_per_s = placed.speeds[h];
  if (opt.measure && !rates_known) {
    for (int h = 0; h < int(m.homes.size()); ++h) {
      std::vector<std::string> files;
      for (int64_t l = 0; l < bank.num_layers; ++l)
        if (!placement[size_t(l)].empty()) files.push_back(id + "/" + layer_file(l));
      m.homes[size_t(h)].read_bytes_per_s = measure_read_bandwidth(m.homes[size_t(h)].path, files, 256ull << 20);
    }
  }
  write_manifest(m, manifest_path(model_dir));
  // The new manifest is in place: files only the old one used go (a crash before here left the old
  // install whole; one after leaves at most unreferenced files).
  const std::set<std::string> now = files_of(m);
  for (const std::string& f : old_files)
    if (!now.count(f)) ::unlink(f.c_str());
  return m;
}

}  // namespace sluice::store
