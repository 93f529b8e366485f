// Manifest serialisation and validation.
#include "store/manifest.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/durable_file.h"
#include "core/error.h"
#include "core/regular_file.h"
#include "format/json_util.h"
#include "format/safetensors.h"

namespace sluice::store {

using nlohmann::json;

const std::vector<Holder>& Manifest::of(int layer, int expert) const {
  return holders.at(size_t(layer)).at(size_t(expert));
}

void parts_of(const std::vector<Holder>& holders, std::vector<Part>& out) {
  out.clear();
  for (const Holder& h : holders)
    if (std::find_if(out.begin(), out.end(), [&](const Part& p) { return p.at == h.at; }) == out.end())
      out.push_back({h.at, h.length});
  std::sort(out.begin(), out.end(), [](const Part& a, const Part& b) { return a.at < b.at; });
}

std::vector<Part> parts_of(const std::vector<Holder>& holders) {
  std::vector<Part> out;
  parts_of(holders, out);
  return out;
}

size_t copies_of(const std::vector<Holder>& holders) {
  return size_t(std::count_if(holders.begin(), holders.end(), [](const Holder& h) { return h.at == 0; }));
}

uint64_t Manifest::bytes_on_home(int home) const {
  uint64_t n = 0;
  for (const auto& layer : holders)
    for (const auto& hs : layer)
      for (const auto& h : hs)
        if (h.home == home) n += h.length;
  return n;
}

std::string model_identity(const std::string& config_text, const ExpertLayout& layout) {
  std::string key = config_text;
  for (const auto& s : layout.segments) key += cat(";", s.key, "@", s.offset, "+", s.bytes);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)XXH3_64bits(key.data(), key.size()));
  return buf;
}

std::string manifest_path(const std::string& model_dir) { return model_dir + "/sluice-manifest.json"; }

void write_manifest(const Manifest& m, const std::string& path) {
  json homes = json::array();
  for (const auto& h : m.homes)
    homes.push_back({{"path", h.path}, {"capacity_bytes", h.capacity_bytes}, {"read_bytes_per_s", h.read_bytes_per_s}});
  json layers = json::array();
  for (size_t l = 0; l < m.holders.size(); ++l) {
    json experts = json::array();
    for (const auto& hs : m.holders[l]) {
      json list = json::array();
      for (const auto& h : hs) {
        char sum[17];
        std::snprintf(sum, sizeof sum, "%016llx", (unsigned long long)h.xxh3);
        list.push_back({{"home", h.home}, {"file", h.file}, {"offset", h.offset}, {"length", h.length}, {"xxh3", sum}});
        if (!h.local) list.back()["local"] = false;
        if (h.at) list.back()["at"] = h.at;
      }
      experts.push_back(list);
    }
    layers.push_back(experts);
  }
  json j = {{"format", kManifestFormat},          {"version", kManifestVersion},
            {"model_id", m.model_id},              {"record_bytes", m.layout.record_bytes},
            {"slot_bytes", m.layout.slot_bytes},   {"num_layers", m.num_layers},
            {"num_experts", m.num_experts},        {"homes", homes},
            {"layers", layers}};
  write_file_durably(path, j.dump(1) + "\n");
}

namespace {
Manifest from_json(const json& j, const std::string& path, const ExpertBank& bank, const std::string& model_id);
}  // namespace

Manifest read_manifest(const std::string& path, const ExpertBank& bank, const std::string& model_id) {
  require_regular_if_exists(path);  // a FIFO in the manifest's place must not block the reader
  return from_json(format::read_json_file(path), path, bank, model_id);
}

Manifest parse_manifest(const std::string& text, const std::string& path, const ExpertBank& bank,
                        const std::string& model_id) {
  return from_json(format::parse_json_text(text, path), path, bank, model_id);
}

namespace {

Manifest from_json(const json& j, const std::string& path, const ExpertBank& bank, const std::string& model_id) {
  const std::string& w = path;
  if (!j.is_object() || format::get_string_or(j, "format", "", w) != kManifestFormat)
    fail(path, ": not a sluice expert manifest (field 'format' must be '", kManifestFormat, "')");
  int64_t version = format::get_int(j, "version", w);
  if (version != kManifestVersion)
    fail(path, ": manifest version ", version, " is not supported by this sluice (expects ", kManifestVersion,
         "); run `sluice upgrade` or prepare again");
  Manifest m;
  m.model_id = format::get_string(j, "model_id", w);
  if (m.model_id != model_id)
    fail(path, ": manifest belongs to another model (model_id ", m.model_id, ", this model is ", model_id, ")");
  m.layout = bank.layout;
  if (uint64_t(format::get_int(j, "record_bytes", w)) != m.layout.record_bytes ||
      uint64_t(format::get_int(j, "slot_bytes", w)) != m.layout.slot_bytes)
    fail(path, ": record_bytes/slot_bytes disagree with the model's expert layout");
  m.num_layers = format::get_int(j, "num_layers", w);
  m.num_experts = format::get_int(j, "num_experts", w);
  if (m.num_layers != bank.num_layers || m.num_experts != bank.num_experts)
    fail(path, ": num_layers/num_experts disagree with config.json");
  for (const json& h : format::get_array(j, "homes", w)) {
    Home home;
    home.path = format::get_string(h, "path", w + " homes[]");
    if (home.path.empty()) fail(path, ": homes[] has an empty path");
    // A relative home is relative to the manifest (the model directory), never to the working
    // directory of whoever runs sluice: the same install must read the same files from anywhere.
    if (home.path[0] != '/')
      home.path = (std::filesystem::absolute(path).parent_path() / home.path).lexically_normal().string();
    home.capacity_bytes = uint64_t(format::get_int_or(h, "capacity_bytes", 0, w + " homes[]"));
    home.read_bytes_per_s = format::get_number_or(h, "read_bytes_per_s", 0, w + " homes[]");
    m.homes.push_back(home);
  }
  if (m.homes.empty()) fail(path, ": manifest lists no homes");
  const json& layers = format::get_array(j, "layers", w);
  if (int64_t(layers.size()) != m.num_layers) fail(path, ": 'layers' must have num_layers entries");
  m.holders.resize(size_t(m.num_layers));
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const json& experts = layers[size_t(l)];
    bool moe = bank.is_moe(int(l));
    if (!experts.is_array() || int64_t(experts.size()) != (moe ? m.num_experts : 0))
      fail(path, ": layer ", l, " must list ", moe ? m.num_experts : 0, " experts");
    for (int64_t e = 0; e < int64_t(experts.size()); ++e) {
      std::vector<Holder> hs;
      std::string where = cat(path, " layer ", l, " expert ", e);
      if (!experts[size_t(e)].is_array() || experts[size_t(e)].empty()) fail(where, ": no holders");
      for (const json& h : experts[size_t(e)]) {
        Holder x;
        const int64_t home = format::get_int(h, "home", where);  // range-checked before it is narrowed
        if (home < 0 || home >= int64_t(m.homes.size())) fail(where, ": holder names home ", home, " which is not listed");
        x.home = int(home);
        x.file = format::get_string(h, "file", where);
        if (x.file.empty() || x.file.find("..") != std::string::npos || x.file[0] == '/')
          fail(where, ": holder file '", x.file, "' must be a plain path inside its home");
        if (format::get_int(h, "offset", where) < 0) fail(where, ": holder offset must not be negative");
        x.offset = uint64_t(format::get_int(h, "offset", where));
        x.length = uint64_t(format::get_int(h, "length", where));
        const int64_t at = format::get_int_or(h, "at", 0, where);
        if (at < 0 || uint64_t(at) >= m.layout.slot_bytes) fail(where, ": holder 'at' must be inside the slot");
        x.at = uint64_t(at);
        if (x.offset % ExpertLayout::kAlign || x.at % ExpertLayout::kAlign || x.length % ExpertLayout::kAlign ||
            x.length == 0 || x.length > m.layout.slot_bytes - x.at)
          fail(where, ": holder offset, at and length must be 4 KiB aligned, and [at, at + length) a non-empty ",
               "part of the slot (slot_bytes ", m.layout.slot_bytes, ")");
        std::string sum = format::get_string(h, "xxh3", where);
        char* end = nullptr;
        x.xxh3 = std::strtoull(sum.c_str(), &end, 16);
        if (sum.size() != 16 || *end) fail(where, ": xxh3 must be 16 hex digits");
        x.local = format::get_bool_or(h, "local", true, where);
        hs.push_back(x);
      }
      // The parts tile the slot, and the copies of one part agree on its length.
      uint64_t next = 0;
      for (const Part& p : parts_of(hs)) {
        if (p.at != next)
          fail(where, ": the holders' parts do not tile the record (one ends at byte ", next, ", the next starts at ",
               p.at, ")");
        for (const Holder& x : hs)
          if (x.at == p.at && x.length != p.length)
            fail(where, ": two holders of the part at ", p.at, " differ in length (", p.length, " and ", x.length, ")");
        next = p.at + p.length;
      }
      if (next != m.layout.slot_bytes)
        fail(where, ": the holders' parts end at byte ", next, ", not at slot_bytes (", m.layout.slot_bytes, ")");
      m.holders[size_t(l)].push_back(std::move(hs));
    }
  }
  return m;
}

}  // namespace

}  // namespace sluice::store
