// Verification and repair of an installation.
#include "fetch/verify.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/arena.h"
#include "core/durable_file.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "fetch/install_record.h"
#include "fetch/setup.h"
#include "fetch/sha256.h"
#include "fetch/stream_manifest.h"
#include "fetch/stream_source.h"
#include "store/home_file.h"
#include "store/manifest.h"

namespace sluice::fetch {
namespace fs = std::filesystem;

namespace {

std::string read_local(const std::string& path) { return read_regular_file(path); }

// "" when the file matches, else what is wrong.
std::string check_file(const std::string& path, const FileEntry& f) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return cat(path, ": missing");
  uint64_t size = fs::file_size(path, ec);
  if (size != f.size) return cat(path, ": ", size, " bytes, expected ", f.size);
  std::string sum = sha256_file(path);
  if (sum != f.sha256) return cat(path, ": SHA-256 ", sum, ", expected ", f.sha256);
  return "";
}

}  // namespace

VerifyReport verify_install(const std::string& model_dir, const store::ExpertBankFromConfig& expert_bank, bool repair,
                            const SourceOptions& opt, bool quiet) {
  if (!expert_bank) fail("verify: no expert-bank function given");
  VerifyReport rep;
  rep.repair = repair;
  auto note = [&](const std::string& p) {
    rep.problems.push_back(p);
    if (!quiet) std::fprintf(stderr, "verify: %s\n", p.c_str());
  };
  const std::string config_path = model_dir + "/config.json";
  // The expert tensors of the config as it is on disk now (a repair may just have replaced it).
  auto expert_names = [&] { return expert_bank(read_local(config_path), config_path).tensor_names(); };
  bool have_record = fs::exists(record_path(model_dir));
  std::unique_ptr<InstallRecord> rec;
  std::unique_ptr<Source> src;
  if (have_record) {
    rec = std::make_unique<InstallRecord>(read_record(model_dir));
    if (repair) src = open_source(rec->source, opt);
    for (auto& f : rec->files) {
      ++rep.files_checked;
      std::string bad = check_file(model_dir + "/" + f.name, f);
      if (bad.empty()) continue;
      note(bad);
      if (!repair) continue;
      try {
        if (rec->mode == "stream" && f.name == "model.safetensors.index.json") {
          // The stream index is ours: rebuilt from the record.
          std::vector<std::vector<std::string>> keep(rec->shards.size());
          std::set<std::string> local_names;
          for (const auto& l : rec->local_shards) local_names.insert(l.name);
          std::vector<std::string> experts = expert_names();
          std::set<std::string> is_expert(experts.begin(), experts.end());
          for (size_t i = 0; i < rec->shards.size(); ++i)
            for (const auto& t : rec->shards[i].tensors)
              if (!is_expert.count(t.name)) keep[i].push_back(t.name);
          write_stream_index(*rec, keep, model_dir);
        } else {
          std::string text = src->read_text(f.name, 256 << 20);
          Sha256 h;
          h.update(text.data(), text.size());
          std::string sum = h.hex();
          if (sum != f.sha256) fail(src->where(f.name), ": the source's bytes hash to ", sum, ", not the installed ", f.sha256);
          write_file_durably(model_dir + "/" + f.name, text);
        }
        if (!check_file(model_dir + "/" + f.name, f).empty()) fail(f.name, ": still wrong after repair");
        rep.repaired.push_back(bad);
      } catch (const Error& e) {
        rep.unfixed.push_back(e.what());
      }
    }
    for (auto& f : rec->local_shards) {
      ++rep.files_checked;
      std::string path = model_dir + "/" + f.name;
      std::string bad = check_file(path, f);
      if (bad.empty()) continue;
      note(bad);
      if (!repair) continue;
      try {
        const SourceShard& s = rec->shard(f.name);
        // The bad file is replaced only by a whole, verified one (temporary name, then rename).
        if (rec->mode == "full") {
          ::unlink((path + ".sluice-part").c_str());
          ::unlink((path + ".sluice-part.len").c_str());
          std::string want = !s.sha256.empty() ? s.sha256 : f.sha256;
          download_file(*src, f.name, s.size, want, model_dir, nullptr);
        } else {
          std::vector<std::string> experts = expert_names();
          std::set<std::string> is_expert(experts.begin(), experts.end());
          std::vector<std::string> keep;
          for (const auto& t : s.tensors)
            if (!is_expert.count(t.name)) keep.push_back(t.name);
          ::unlink((path + ".sluice-part.done").c_str());
          FileEntry got = build_local_shard(*src, s, keep, model_dir, nullptr);
          if (got.sha256 != f.sha256) fail(path, ": rebuilt from the source but hashes to ", got.sha256, ", not ", f.sha256);
        }
        if (!check_file(path, f).empty()) fail(path, ": still wrong after repair");
        rep.repaired.push_back(bad);
      } catch (const Error& e) {
        rep.unfixed.push_back(e.what());
      }
    }
  }

  const std::string mpath = store::manifest_path(model_dir);
  if (!fs::exists(mpath)) {
    if (!have_record) fail(model_dir, ": nothing to verify (no ", kRecordName, " and no expert manifest)");
    return rep;
  }
  const std::string config_text = read_local(config_path);
  const store::ExpertBank bank = expert_bank(config_text, config_path);
  const store::ExpertLayout& layout = bank.layout;
  store::Manifest m = store::read_manifest(mpath, bank, store::model_identity(config_text, layout));
  size_t journaled = replay_journal(model_dir, m);
  std::shared_ptr<StreamSource> stream;
  if (repair && have_record) stream = std::make_shared<StreamSource>(model_dir, *rec, bank, opt);

  // Home files: present and of the size their records need.
  std::map<std::string, uint64_t> need;
  for (const auto& layer : m.holders)
    for (const auto& hs : layer)
      for (const auto& h : hs) {
        std::string p = m.homes[size_t(h.home)].path + "/" + h.file;
        need[p] = std::max(need[p], h.offset + h.length);
      }
  for (const auto& [p, size] : need) {
    std::error_code ec;
    uint64_t have = fs::file_size(p, ec);
    std::string bad = ec ? cat(p, ": home file missing") : have < size ? cat(p, ": home file has ", have, " bytes, its records need ", size) : "";
    if (bad.empty()) continue;
    note(bad);
    if (repair) rep.unfixed.push_back(bad + " (run `sluice setup` again or prepare again)");
  }
  auto buf = allocate_touched(layout.slot_bytes, store::ExpertLayout::kAlign);
  for (int64_t l = 0; l < m.num_layers; ++l) {
    for (int64_t e = 0; e < int64_t(m.holders[size_t(l)].size()); ++e) {
      const auto& hs = m.holders[size_t(l)][size_t(e)];
      if (hs.empty()) continue;
      if (!hs[0].local) {
        ++rep.experts_missing;
        continue;
      }
      bool bad_any = false;
      for (const auto& h : hs) {
        ++rep.experts_checked;
        std::string p = m.homes[size_t(h.home)].path + "/" + h.file;
        std::string why;
        int fd = store::open_home_file(m.homes[size_t(h.home)].path, h.file, O_RDONLY, why);
        ssize_t r = fd < 0 ? -1 : ::pread(fd, buf.get(), h.length, off_t(h.offset));
        if (fd >= 0) ::close(fd);
        if (fd < 0) why = cat("cannot be opened: ", why);
        else if (r != ssize_t(h.length)) why = "cannot be read in full";
        else if (XXH3_64bits(buf.get(), h.length) != h.xxh3) why = "checksum mismatch";
        if (why.empty()) continue;
        note(cat(p, ": expert ", e, " of layer ", l, " (offset ", h.offset, "): ", why));
        bad_any = true;
      }
      if (!bad_any || !repair) continue;
      try {
        if (!stream) fail("expert ", e, " of layer ", l, ": no source to repair from (not installed by `sluice setup`)");
        uint64_t sum = stream->fetch_record(int(l), int(e), buf.get());
        // Each holder's bytes (the whole record, or its stripe) must be what the manifest says.
        for (const auto& h : hs)
          if (XXH3_64bits(buf.get() + h.at, h.length) != h.xxh3)
            fail("expert ", e, " of layer ", l, ": the source's record (bytes ", h.at, "..", h.at + h.length,
                 ") does not hash to the manifest's checksum");
        stream->store_record(m, int(l), int(e), buf.get(), sum);
        rep.repaired.push_back(cat("expert ", e, " of layer ", l));
      } catch (const Error& ex) {
        rep.unfixed.push_back(ex.what());
      }
    }
  }
  // Repair also folds the fetched-experts journal into the manifest (atomic), then drops it.
  if (repair && journaled && rep.unfixed.empty()) {
    store::write_manifest(m, mpath);
    ::unlink((model_dir + "/" + kJournalName).c_str());
  }
  return rep;
}

}  // namespace sluice::fetch
