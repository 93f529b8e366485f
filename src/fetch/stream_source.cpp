// On-demand expert fetch: locating expert tensors in source shards, Range reads, validation,
// durable writes into the homes and the fetched-experts journal.
#include "fetch/stream_source.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "format/json_util.h"
#include "store/home_file.h"

namespace sluice::fetch {
namespace fs = std::filesystem;

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += cat(i ? ", " : "", shape[i]);
  return s + "]";
}

}  // namespace

ExpertLocator::ExpertLocator(const InstallRecord& rec, store::ExpertBank bank) : bank_(std::move(bank)) {
  for (const auto& s : rec.shards)
    for (const auto& t : s.tensors) tensors_[t.name] = {s.name, &t};
}

std::vector<ExpertLocator::Piece> ExpertLocator::pieces(int layer, int expert) const {
  std::vector<Piece> out;
  for (const auto& seg : bank_.layout.segments) {
    std::string name = bank_.tensor_name(seg, layer, expert);
    auto it = tensors_.find(name);
    if (it == tensors_.end()) fail("source: expert tensor ", name, " is in no shard of the source");
    const format::TensorInfo& t = *it->second.second;
    const bool fused = store::ExpertBank::fused(seg);
    const uint64_t want = fused ? seg.bytes * uint64_t(bank_.num_experts) : seg.bytes;
    if (t.dtype != seg.dtype || t.nbytes != want)
      fail("source shard ", it->second.first, ": tensor ", name, " is ", dtype_name(t.dtype), " of ", t.nbytes,
           " bytes; the expert layout needs ", dtype_name(seg.dtype), " of ", want, " bytes");
    // A fused tensor of the right size could still hold the experts along another dimension.
    if (fused && t.shape != bank_.tensor_shape(seg))
      fail("source shard ", it->second.first, ": tensor ", name, " has shape ", shape_text(t.shape),
           "; the expert bank needs ", shape_text(bank_.tensor_shape(seg)), " (experts along the first dimension)");
    out.push_back({it->second.first, t.file_offset + bank_.offset_in_tensor(seg, expert), seg.bytes});
  }
  return out;
}

std::shared_ptr<StreamSource> StreamSource::open(const std::string& model_dir, const store::ExpertBank& bank,
                                                 const SourceOptions& opt) {
  if (!fs::exists(record_path(model_dir))) return nullptr;
  return std::make_shared<StreamSource>(model_dir, read_record(model_dir), bank, opt);
}

StreamSource::StreamSource(const std::string& model_dir, InstallRecord rec, const store::ExpertBank& bank,
                           const SourceOptions& opt)
    : model_dir_(model_dir), rec_(std::move(rec)), opt_(opt) {
  locator_ = std::make_unique<ExpertLocator>(rec_, bank);
}

size_t replay_journal(const std::string& model_dir, store::Manifest& m) {
  std::ifstream in(model_dir + "/" + kJournalName);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    // "LAYER EXPERT SUM": the record's xxh3, for a record held whole; a striped record's line
    // has one sum per holder, in the manifest's order. A torn last line (crash while appending)
    // does not parse or does not match its holders and is ignored: its expert is fetched again.
    std::istringstream words(line);
    long long layer = -1, expert = -1;
    if (!(words >> layer >> expert)) continue;
    std::vector<uint64_t> sums;
    bool ok = true;
    for (std::string w; ok && words >> w;) {
      ok = w.size() == 16 && w.find_first_not_of("0123456789abcdef") == std::string::npos;
      if (ok) sums.push_back(std::strtoull(w.c_str(), nullptr, 16));
    }
    if (!ok || sums.empty() || layer < 0 || layer >= m.num_layers || expert < 0 || expert >= m.num_experts) continue;
    if (m.holders[size_t(layer)].empty()) continue;
    auto& hs = m.holders[size_t(layer)][size_t(expert)];
    const bool whole = std::all_of(hs.begin(), hs.end(), [&](const store::Holder& h) {
      return h.at == 0 && h.length == m.layout.slot_bytes;
    });
    if (!(sums.size() == hs.size() || (sums.size() == 1 && whole))) continue;
    // Only holders still waiting for their record: a local holder's checksum is the manifest's
    // (a repaired record of a prepared install is journaled too).
    for (size_t i = 0; i < hs.size(); ++i) {
      if (hs[i].local) continue;
      hs[i].local = true;
      hs[i].xxh3 = sums[sums.size() == 1 ? 0 : i];
    }
    ++n;
  }
  return n;
}

void StreamSource::adopt(store::Manifest& m) {
  if (m.layout.slot_bytes != layout().slot_bytes)
    fail(record_path(model_dir_), ": the install record's expert layout does not match the manifest");
  replay_journal(model_dir_, m);
}

uint64_t StreamSource::fetch_record(int layer, int expert, std::byte* dst) {
  const auto& lay = layout();
  auto pieces = locator_->pieces(layer, expert);
  {
    // Opened on first need: a complete install runs even when its source is gone.
    std::lock_guard<std::mutex> lock(source_mu_);
    if (!src_) src_ = open_source(rec_.source, opt_);
  }
  std::memset(dst, 0, lay.slot_bytes);
  std::vector<const std::byte*> seg;
  for (size_t i = 0; i < pieces.size(); ++i) {
    std::byte* at = dst + lay.segments[i].offset;
    // Adjacent tensors in the source could be one request; each is small enough (MBs) not to matter.
    src_->read_into(pieces[i].shard, pieces[i].offset, pieces[i].offset + pieces[i].bytes, at);
    seg.push_back(at);
  }
  lay.validate(seg, cat(src_->where(pieces[0].shard), ": expert ", expert, " of layer ", layer));
  return XXH3_64bits(dst, lay.slot_bytes);
}

void StreamSource::store_record(const store::Manifest& m, int layer, int expert, const std::byte* record,
                                uint64_t sum) {
  for (const auto& h : m.of(layer, expert)) {
    std::string path = m.homes[size_t(h.home)].path + "/" + h.file;
    std::string why;
    // No symlinks below the home: a record is written only into the home's own file.
    int fd = store::open_home_file(m.homes[size_t(h.home)].path, h.file, O_WRONLY, why);
    if (fd < 0) fail(path, ": cannot open to store expert ", expert, " of layer ", layer, ": ", why);
    size_t done = 0;
    while (done < h.length) {
      ssize_t w = ::pwrite(fd, record + h.at + done, h.length - done, off_t(h.offset + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        int err = errno;
        ::close(fd);
        fail(path, ": write of expert ", expert, " of layer ", layer, " failed: ", std::strerror(err));
      }
      done += size_t(w);
    }
    int rc = ::fdatasync(fd);
    ::close(fd);
    if (rc != 0) fail(path, ": fsync failed: ", std::strerror(errno));
  }
  // Only now, with the bytes durable, does the journal say the expert is local.
  std::lock_guard<std::mutex> lock(journal_mu_);
  std::string jpath = model_dir_ + "/" + kJournalName;
  int fd = ::open(jpath.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) fail(jpath, ": cannot open: ", std::strerror(errno));
  // One sum for a record held whole, else one per holder (its part's).
  const auto& hs = m.of(layer, expert);
  std::string line = cat(layer, " ", expert);
  char hex[24];
  const bool whole = std::all_of(hs.begin(), hs.end(),
                                 [&](const store::Holder& h) { return h.at == 0 && h.length == m.layout.slot_bytes; });
  for (size_t i = 0; i < (whole ? 1 : hs.size()); ++i) {
    const uint64_t x = whole ? sum : XXH3_64bits(record + hs[i].at, hs[i].length);
    std::snprintf(hex, sizeof hex, " %016llx", (unsigned long long)x);
    line += hex;
  }
  line += "\n";
  bool ok = ::write(fd, line.data(), line.size()) == ssize_t(line.size()) && ::fdatasync(fd) == 0;
  ::close(fd);
  if (!ok) fail(jpath, ": cannot append");
}

void StreamSource::fetch(const store::Manifest& m, int layer, std::span<const int32_t> experts,
                         std::span<std::byte* const> dst, std::span<uint64_t> sums) {
  std::vector<std::exception_ptr> errors(experts.size());
  auto one = [&](size_t i) {
    try {
      sums[i] = fetch_record(layer, experts[i], dst[i]);
      store_record(m, layer, experts[i], dst[i], sums[i]);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  for (size_t start = 0; start < experts.size(); start += size_t(std::max(1, parallel))) {
    size_t end = std::min(experts.size(), start + size_t(std::max(1, parallel)));
    std::vector<std::thread> threads;
    for (size_t i = start + 1; i < end; ++i) threads.emplace_back(one, i);
    one(start);
    for (auto& t : threads) t.join();
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace sluice::fetch
