// Stream-install index, source expert check and not-yet-local manifest.
#include "fetch/stream_manifest.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/durable_file.h"
#include "core/error.h"
#include "fetch/sha256.h"
#include "fetch/stream_source.h"
#include "format/safetensors.h"
#include "store/prepare.h"

namespace sluice::fetch {
namespace fs = std::filesystem;

FileEntry write_stream_index(const InstallRecord& rec, const std::vector<std::vector<std::string>>& keep,
                             const std::string& dir) {
  nlohmann::json map = nlohmann::json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < rec.shards.size(); ++i)
    for (const auto& name : keep[i]) {
      map[name] = rec.shards[i].name;
      for (const auto& t : rec.shards[i].tensors)
        if (t.name == name) total += t.nbytes;
    }
  nlohmann::json j = {{"metadata", {{"total_size", total}, {"sluice_note", "non-expert tensors of a --stream install"}}},
                      {"weight_map", map}};
  std::string text = j.dump(2) + "\n";
  write_file_durably(dir + "/model.safetensors.index.json", text);
  Sha256 h;
  h.update(text.data(), text.size());
  return FileEntry{"model.safetensors.index.json", text.size(), h.hex(), ""};
}

void check_source_experts(const InstallRecord& rec, const store::ExpertBank& bank) {
  ExpertLocator loc(rec, bank);
  for (int l : bank.moe_layers)
    for (int64_t e = 0; e < bank.num_experts; ++e) loc.pieces(l, int(e));
}

store::Manifest write_stream_manifest(const std::string& model_dir, const std::string& config_text,
                                      const store::ExpertBank& bank, const std::vector<store::Home>& homes,
                                      store::PrepareOptions::Stripe stripe) {
  const store::ExpertLayout& layout = bank.layout;
  const std::string id = store::model_identity(config_text, layout);
  const std::string path = store::manifest_path(model_dir);
  if (fs::exists(path)) {
    try {
      return store::read_manifest(path, bank, id);  // a rerun: keep placement and fetched experts
    } catch (const Error&) {
      // Another model's or an unreadable manifest: placed again below (its homes are checked).
    }
  }
  store::PrepareOptions po;
  po.homes = homes;
  po.measure = false;
  po.stripe = stripe;
  po.speeds = store::measured_drive_speeds(homes);
  // Which homes hold each record, and which part of it each home holds (the whole, or its stripe).
  const auto [placement, part_on] = store::place_records(bank, layout.slot_bytes, po, nullptr);
  for (const auto& h : homes) store::claim_home(h, id);
  store::Manifest m;
  m.model_id = id;
  m.layout = layout;
  m.num_layers = bank.num_layers;
  m.num_experts = bank.num_experts;
  m.homes = homes;
  m.holders.resize(size_t(bank.num_layers));
  for (int64_t l = 0; l < bank.num_layers; ++l) {
    if (placement[size_t(l)].empty()) continue;
    m.holders[size_t(l)].resize(size_t(bank.num_experts));
    for (int h = 0; h < int(homes.size()); ++h) {
      const store::Part part = part_on[size_t(h)];
      uint64_t slots = 0;
      for (int64_t e = 0; e < bank.num_experts; ++e) {
        const auto& hs = placement[size_t(l)][size_t(e)];
        if (std::find(hs.begin(), hs.end(), h) == hs.end()) continue;
        store::Holder x{h, store::expert_file(id, l), slots * part.length, part.length, 0, false, part.at};
        m.holders[size_t(l)][size_t(e)].push_back(x);
        ++slots;
      }
      if (!slots) continue;
      // A sparse file of the layer's final size: records land in place as they are fetched.
      std::string file = homes[size_t(h)].path + "/" + store::expert_file(id, l);
      fs::create_directories(fs::path(file).parent_path());
      std::error_code ec;
      if (fs::exists(file) && fs::file_size(file, ec) == slots * part.length) continue;
      PendingFile layer(file, file + ".tmp");
      if (::ftruncate(layer.fd(), off_t(slots * part.length)) != 0)
        fail(file, ": cannot create the layer file: ", std::strerror(errno));
      layer.commit();
    }
  }
  // Experts fetched under an earlier manifest that was replaced are not trusted: start a new journal.
  ::unlink((model_dir + "/" + kJournalName).c_str());
  store::write_manifest(m, path);
  return m;
}

}  // namespace sluice::fetch
