// Setup: survey, small files, resumable shard downloads (--full), non-expert shard extraction
// and an on-demand expert manifest (--stream).
#include "fetch/setup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <unordered_set>

#include "core/durable_file.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "fetch/progress.h"
#include "fetch/sha256.h"
#include "fetch/stream_manifest.h"
#include "format/json_util.h"
#include "store/prepare.h"

namespace sluice::fetch {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Closes a descriptor on every way out of a scope.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

void sync_fd(int fd, const std::string& what) {
  if (::fdatasync(fd) != 0) fail(what, ": fsync failed: ", std::strerror(errno));
}

// A download resumed across runs keeps its own `.part` name (a PendingFile's would not survive
// the process): renamed into place once complete, then the directory synced (core/durable_file.h).
void rename_into_place(const std::string& tmp, const std::string& final_path) {
  if (::rename(tmp.c_str(), final_path.c_str()) != 0)
    fail(final_path, ": cannot rename ", tmp, " into place: ", std::strerror(errno));
  fsync_directory(fs::path(final_path).parent_path().string());
}

uint64_t file_size_or(const std::string& path, uint64_t fallback) {
  std::error_code ec;
  uint64_t n = fs::file_size(path, ec);
  return ec ? fallback : n;
}

// A small durable counter next to a part file: how many of its bytes are known to be on disk.
uint64_t read_durable_length(const std::string& path) {
  std::ifstream in(path);
  unsigned long long n = 0;
  if (in >> n) return n;
  return 0;
}

}  // namespace

std::string download_file(Source& src, const std::string& name, uint64_t size, const std::string& sha256,
                          const std::string& dir, Progress* progress) {
  const std::string final_path = dir + "/" + name;
  const std::string part = final_path + ".sluice-part";
  const std::string durable = part + ".len";
  // Only the bytes a previous run synced count: a crash can leave an unsynced tail of garbage.
  uint64_t have = std::min({file_size_or(part, 0), read_durable_length(durable), size});
  int fd = ::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail(part, ": cannot create: ", std::strerror(errno));
  FdCloser closer{fd};
  if (::ftruncate(fd, off_t(have)) != 0) fail(part, ": cannot truncate: ", std::strerror(errno));
  Sha256 hash;
  {
    // Hash what is kept, so that the whole file's SHA-256 comes out without a second pass.
    std::vector<char> buf(4 << 20);
    for (uint64_t off = 0; off < have;) {
      ssize_t r = ::pread(fd, buf.data(), size_t(std::min<uint64_t>(buf.size(), have - off)), off_t(off));
      if (r <= 0) fail(part, ": cannot read back the resumed part: ", std::strerror(errno));
      hash.update(buf.data(), size_t(r));
      off += uint64_t(r);
    }
  }
  if (progress) progress->begin_file(name, size, have);
  uint64_t pos = have, synced = have;
  auto mark_durable = [&] {
    sync_fd(fd, part);
    std::string text = cat(pos, "\n");
    write_file_durably(durable, text);
    synced = pos;
  };
  try {
    src.read(name, have, size, [&](const std::byte* p, size_t n) {
      write_all_at(fd, p, n, pos, part);
      hash.update(p, n);
      pos += n;
      if (progress) progress->add(name, n);
      if (pos - synced >= (64u << 20)) mark_durable();
    });
  } catch (...) {
    // Keep what arrived for the next run: sync it and record its length.
    try {
      if (pos > synced) mark_durable();
    } catch (...) {
    }
    if (progress) progress->end_file(name);
    throw;
  }
  if (progress) progress->end_file(name);
  sync_fd(fd, part);
  uint64_t got = file_size_or(part, 0);
  if (got != size) fail(src.where(name), ": downloaded ", got, " bytes but the source stated ", size);
  std::string sum = hash.hex();
  if (!sha256.empty() && sum != sha256) {
    ::unlink(part.c_str());
    ::unlink(durable.c_str());
    fail(src.where(name), ": SHA-256 mismatch: the source states ", sha256, " but the downloaded bytes hash to ", sum,
         "; the partial download was deleted (run setup again to retry)");
  }
  rename_into_place(part, final_path);
  ::unlink(durable.c_str());
  return sum;
}

FileEntry build_local_shard(Source& src, const SourceShard& shard, const std::vector<std::string>& keep_names,
                            const std::string& dir, Progress* progress) {
  std::set<std::string> keep(keep_names.begin(), keep_names.end());
  std::vector<const format::TensorInfo*> kept;
  for (const auto& t : shard.tensors)
    if (keep.count(t.name)) kept.push_back(&t);
  std::sort(kept.begin(), kept.end(), [](auto* a, auto* b) { return a->file_offset < b->file_offset; });
  // The new header: the kept tensors in source order, packed.
  json header = json::object();
  uint64_t data = 0;
  struct Run {
    uint64_t src_begin, src_end, dst_begin;
  };
  std::vector<Run> runs;
  for (const auto* t : kept) {
    header[t->name] = {{"dtype", std::string(dtype_name(t->dtype))}, {"shape", t->shape},
                       {"data_offsets", {data, data + t->nbytes}}};
    if (t->nbytes) {
      if (!runs.empty() && runs.back().src_end == t->file_offset)
        runs.back().src_end += t->nbytes;  // adjacent in the source: one Range request
      else
        runs.push_back({t->file_offset, t->file_offset + t->nbytes, data});
    }
    data += t->nbytes;
  }
  std::string text = header.dump();
  while ((text.size() + 8) % 8) text += ' ';
  const uint64_t data_start = 8 + text.size(), total = data_start + data;
  for (auto& r : runs) r.dst_begin += data_start;

  const std::string final_path = dir + "/" + shard.name;
  const std::string part = final_path + ".sluice-part";
  const std::string journal = part + ".done";
  char plan[17];
  std::snprintf(plan, sizeof plan, "%016llx",
                (unsigned long long)XXH3_64bits_withSeed(text.data(), text.size(), total));
  // Runs a previous run finished. The journal is trusted only for the same plan and only beside
  // its part file at full size: a run killed between renaming the part into place and removing
  // the journal leaves a journal whose part is gone, and resuming from it would write a file of
  // headers and holes (every tensor zero) under the shard's name.
  std::set<size_t> done;
  {
    std::ifstream in(journal);
    std::string first;
    if (file_size_or(part, 0) == total && in >> first && first == plan) {
      size_t i;
      while (in >> i)
        if (i < runs.size()) done.insert(i);
    } else {
      done.clear();
    }
  }
  if (done.empty()) ::unlink(part.c_str());
  int fd = ::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail(part, ": cannot create: ", std::strerror(errno));
  FdCloser closer{fd};
  if (::ftruncate(fd, off_t(total)) != 0) fail(part, ": cannot size to ", total, " bytes: ", std::strerror(errno));
  std::byte len[8];
  for (int i = 0; i < 8; ++i) len[i] = std::byte((text.size() >> (8 * i)) & 0xff);
  write_all_at(fd, len, 8, 0, part);
  write_all_at(fd, reinterpret_cast<const std::byte*>(text.data()), text.size(), 8, part);
  uint64_t already = 0;
  for (size_t i : done) already += runs[i].src_end - runs[i].src_begin;
  if (progress) progress->begin_file(shard.name, data, already);
  {
    std::ofstream j(journal, done.empty() ? std::ios::trunc : std::ios::app);
    if (done.empty()) j << plan << "\n";
    if (!j) fail(journal, ": cannot write");
  }
  try {
    for (size_t i = 0; i < runs.size(); ++i) {
      if (done.count(i)) continue;
      uint64_t at = runs[i].dst_begin;
      src.read(shard.name, runs[i].src_begin, runs[i].src_end, [&](const std::byte* p, size_t n) {
        write_all_at(fd, p, n, at, part);
        at += n;
        if (progress) progress->add(shard.name, n);
      });
      sync_fd(fd, part);  // the run's bytes are on disk before the journal says so
      int jfd = ::open(journal.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
      if (jfd < 0) fail(journal, ": cannot open: ", std::strerror(errno));
      std::string line = cat(i, "\n");
      bool ok = ::write(jfd, line.data(), line.size()) == ssize_t(line.size()) && ::fdatasync(jfd) == 0;
      ::close(jfd);
      if (!ok) fail(journal, ": cannot append");
    }
  } catch (...) {
    if (progress) progress->end_file(shard.name);
    throw;
  }
  if (progress) progress->end_file(shard.name);
  sync_fd(fd, part);
  ::close(closer.fd);
  closer.fd = -1;
  // The finished file must parse as safetensors before it takes its final name.
  auto check = format::SafetensorsFile::open(part);
  if (check->tensors().size() != kept.size()) fail(part, ": wrote ", check->tensors().size(), " tensors, expected ", kept.size());
  check.reset();
  FileEntry f{shard.name, total, sha256_file(part), ""};
  rename_into_place(part, final_path);
  ::unlink(journal.c_str());
  return f;
}

namespace {

// Copies config, tokenizer and (for --full, or an unindexed source) index files, checked.
std::vector<FileEntry> fetch_small_files(Source& src, const std::map<std::string, std::string>& sums,
                                         const std::string& dir, bool with_index) {
  std::vector<FileEntry> out;
  std::vector<std::string> names = small_file_names();
  if (with_index) names.push_back("model.safetensors.index.json");
  for (const std::string& name : names) {
    RemoteFile f = src.stat(name);
    if (!f.found) continue;
    std::string text = src.read_text(name, 256 << 20);
    Sha256 h;
    h.update(text.data(), text.size());
    FileEntry e{name, text.size(), h.hex(), sums.count(name) ? sums.at(name) : f.sha256};
    if (!e.source_sha256.empty() && e.source_sha256 != e.sha256)
      fail(src.where(name), ": SHA-256 mismatch: the source states ", e.source_sha256, " but the bytes hash to ", e.sha256);
    write_file_durably(dir + "/" + name, text);
    out.push_back(e);
  }
  return out;
}

// Runs `work(i)` for i in [0, n) on up to `jobs` threads; rethrows the first error after all stop.
void parallel_for(size_t n, int jobs, const std::function<void(size_t)>& work) {
  std::mutex mu;
  size_t next = 0;
  std::vector<std::string> errors;
  std::exception_ptr first;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next >= n || first) return;
        i = next++;
      }
      try {
        work(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, std::min<int>(jobs, int(n))); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

std::vector<store::Home> homes_of(const SetupOptions& opt) {
  std::vector<store::Home> homes;
  for (const auto& h : opt.homes) homes.push_back(store::parse_home_spec(h));
  if (homes.empty()) {
    // The default home is a path, not a PATH:CAPACITY spec (the model path may hold a ':').
    store::Home h;
    h.path = fs::absolute(opt.model_dir + "/sluice-home").lexically_normal().string();
    homes.push_back(h);
  }
  return homes;
}

// Refuses, before anything is written, to install into a directory or homes that hold another
// model: a config.json that differs from the source's, or a home marked with another model id.
// (Writing first and refusing later left a directory whose config belonged to the new model and
// whose shards and manifest to the old one, which `verify --repair` could not mend.)
void check_destination(const SetupOptions& opt, const std::string& config_text, const store::ExpertBank& bank,
                       const std::string& source_where) {
  const std::string config_path = opt.model_dir + "/config.json";
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    if (read_regular_file(config_path) != config_text)
      fail("setup: ", opt.model_dir, " holds another model (its config.json differs from ", source_where,
           "); install into an empty directory, or remove that one first");
  } else if (fs::exists(store::manifest_path(opt.model_dir), ec) || fs::exists(record_path(opt.model_dir), ec)) {
    fail("setup: ", opt.model_dir, " holds the records of an install whose config.json is gone; remove the directory "
         "or run `sluice verify --repair` there first");
  }
  const std::string id = store::model_identity(config_text, bank.layout);
  for (const auto& h : homes_of(opt)) store::check_home(h, id);
}

}  // namespace

void setup(const SetupOptions& opt) {
  if (opt.mode != "full" && opt.mode != "stream") fail("setup: choose --full or --stream");
  if (!opt.expert_bank) fail("setup: no expert-bank function given (SetupOptions::expert_bank)");
  auto src = open_source(opt.source, opt.source_options);
  InstallRecord rec = survey_source(*src, opt.source);
  rec.mode = opt.mode;
  auto sums = read_sha256sums(*src);
  // A previous run's record tells which finished files need no new hashing.
  std::map<std::string, FileEntry> before;
  if (fs::exists(record_path(opt.model_dir))) {
    try {
      InstallRecord prev = read_record(opt.model_dir);
      // Files of the other mode are different files under the same names: never reused.
      if (prev.mode == opt.mode && prev.source == opt.source)
        for (const auto& f : prev.local_shards) before[f.name] = f;
    } catch (const Error&) {
      // An unreadable record is rebuilt from scratch; the files themselves are checked below.
    }
  }
  std::string config_text = src->read_text("config.json", 16 << 20);
  // The config decides the expert tensors; asking for the bank now fails a wrong source early.
  const store::ExpertBank bank = opt.expert_bank(config_text, src->where("config.json"));
  check_destination(opt, config_text, bank, src->where("config.json"));
  fs::create_directories(opt.model_dir);
  bool stream = opt.mode == "stream";
  rec.files = fetch_small_files(*src, sums, opt.model_dir, /*with_index=*/!stream && rec.indexed);
  // The record is rewritten as each file finishes, so an interrupted setup knows what is done.
  std::mutex record_mu;
  std::map<std::string, FileEntry> finished;
  auto finish = [&](const FileEntry& f) {
    std::lock_guard<std::mutex> lock(record_mu);
    finished[f.name] = f;
    InstallRecord partial = rec;
    partial.local_shards.clear();
    for (const auto& [name, e] : finished) partial.local_shards.push_back(e);
    write_record(partial, opt.model_dir);
  };

  if (!stream) {
    uint64_t total = 0;
    for (const auto& s : rec.shards) total += s.size;
    rec.local_shards.resize(rec.shards.size());
    {
      Progress progress("download", total, opt.quiet);
      parallel_for(rec.shards.size(), opt.jobs, [&](size_t i) {
        const SourceShard& s = rec.shards[i];
        std::string path = opt.model_dir + "/" + s.name;
        auto it = before.find(s.name);
        if (file_size_or(path, UINT64_MAX) == s.size && it != before.end() && it->second.size == s.size) {
          rec.local_shards[i] = it->second;  // finished and verified by an earlier run
          progress.begin_file(s.name, s.size, s.size);
          progress.end_file(s.name);
          return;
        }
        if (file_size_or(path, UINT64_MAX) == s.size) {
          // A whole file under its final name was verified before its rename; with a stated
          // checksum it is checked again (cheap next to downloading it).
          std::string sum = sha256_file(path);
          if (s.sha256.empty() || sum == s.sha256) {
            rec.local_shards[i] = FileEntry{s.name, s.size, sum, s.sha256};
            finish(rec.local_shards[i]);
            return;
          }
          progress.message(cat("setup: ", path, " does not match the source's SHA-256; downloading it again"));
          fs::remove(path);
        }
        std::string sum = download_file(*src, s.name, s.size, s.sha256, opt.model_dir, &progress);
        rec.local_shards[i] = FileEntry{s.name, s.size, sum, s.sha256};
        finish(rec.local_shards[i]);
        if (s.sha256.empty()) progress.message(cat("setup: ", s.name, ": size checked (the source states no SHA-256)"));
      });
    }
    write_record(rec, opt.model_dir);
    store::PrepareOptions po;
    po.homes = homes_of(opt);
    po.measure = opt.measure;
    po.stripe = opt.stripe;
    if (!opt.quiet)
      po.progress = [](uint64_t done, uint64_t total_bytes, const std::string& what) {
        std::fprintf(stderr, "\rprepare: %5.1f%%  %s", total_bytes ? 100.0 * double(done) / double(total_bytes) : 100.0,
                     what.c_str());
        if (done >= total_bytes) std::fprintf(stderr, "\n");
      };
    store::prepare_experts(opt.model_dir, bank, po);
    return;
  }

  // --stream: non-expert tensors only, then a manifest of experts that are not local yet.
  std::vector<std::string> expert_names = bank.tensor_names();
  std::unordered_set<std::string> is_expert(expert_names.begin(), expert_names.end());
  std::vector<std::vector<std::string>> keep(rec.shards.size());
  uint64_t total = 0;
  for (size_t i = 0; i < rec.shards.size(); ++i)
    for (const auto& t : rec.shards[i].tensors)
      if (!is_expert.count(t.name)) {
        keep[i].push_back(t.name);
        total += t.nbytes;
      }
  std::vector<FileEntry> built(rec.shards.size());
  {
    Progress progress("download (non-expert tensors)", total, opt.quiet);
    parallel_for(rec.shards.size(), opt.jobs, [&](size_t i) {
      if (keep[i].empty()) return;
      const SourceShard& s = rec.shards[i];
      auto it = before.find(s.name);
      if (it != before.end() && file_size_or(opt.model_dir + "/" + s.name, UINT64_MAX) == it->second.size) {
        built[i] = it->second;
        return;
      }
      built[i] = build_local_shard(*src, s, keep[i], opt.model_dir, &progress);
      finish(built[i]);
    });
  }
  for (size_t i = 0; i < built.size(); ++i)
    if (!keep[i].empty()) rec.local_shards.push_back(built[i]);
  if (rec.indexed) rec.files.push_back(write_stream_index(rec, keep, opt.model_dir));
  // The expert tensors must all be in the source with the layout's dtypes and sizes.
  check_source_experts(rec, bank);
  write_record(rec, opt.model_dir);
  write_stream_manifest(opt.model_dir, config_text, bank, homes_of(opt), opt.stripe);
}

}  // namespace sluice::fetch
