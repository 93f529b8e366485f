// sluice-source.json serialisation and the survey of a source (config, index, shard headers).
#include "fetch/install_record.h"

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/durable_file.h"
#include "core/error.h"
#include "format/json_util.h"

namespace sluice::fetch {

using nlohmann::json;

const SourceShard& InstallRecord::shard(const std::string& name) const {
  for (const auto& s : shards)
    if (s.name == name) return s;
  fail(kRecordName, ": no source shard named ", name);
}

std::string record_path(const std::string& model_dir) { return model_dir + "/" + kRecordName; }

const std::vector<std::string>& small_file_names() {
  static const std::vector<std::string> names = {
      "config.json",      "generation_config.json", "tokenizer.json",  "tokenizer_config.json",
      "tiktoken.model",   "special_tokens_map.json", "chat_template.jinja"};
  return names;
}

namespace {

json file_json(const FileEntry& f) {
  json j = {{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}};
  if (!f.source_sha256.empty()) j["source_sha256"] = f.source_sha256;
  return j;
}

FileEntry file_from(const json& j, const std::string& w) {
  FileEntry f;
  f.name = format::get_string(j, "name", w);
  if (format::get_int(j, "size", w) < 0) fail(w, ": field 'size' must not be negative");
  f.size = uint64_t(format::get_int(j, "size", w));
  f.sha256 = format::get_string(j, "sha256", w);
  f.source_sha256 = format::get_string_or(j, "source_sha256", "", w);
  if (f.name.empty() || f.name.find('/') != std::string::npos || f.name == "..")
    fail(w, ": file name '", f.name, "' must be a plain name inside the model directory");
  return f;
}

bool plain_name(const std::string& n) { return !n.empty() && n.find('/') == std::string::npos && n != "." && n != ".."; }

void parse_header(SourceShard& s, const std::string& where) {
  uint64_t data = s.size - 8 - s.header.size();
  s.tensors = format::parse_safetensors_header(reinterpret_cast<const std::byte*>(s.header.data()), s.header.size(),
                                               data, where);
}

InstallRecord record_from(const json& j, const std::string& path);

}  // namespace

void write_record(const InstallRecord& r, const std::string& model_dir) {
  json files = json::array(), shards = json::array(), local = json::array();
  for (const auto& f : r.files) files.push_back(file_json(f));
  for (const auto& f : r.local_shards) local.push_back(file_json(f));
  for (const auto& s : r.shards)
    shards.push_back({{"name", s.name}, {"size", s.size}, {"sha256", s.sha256}, {"header", s.header}});
  json j = {{"format", kRecordFormat}, {"version", kRecordVersion}, {"source", r.source}, {"mode", r.mode},
            {"indexed", r.indexed},    {"files", files},               {"shards", shards}, {"local_shards", local}};
  write_file_durably(record_path(model_dir), j.dump(1) + "\n");
}

InstallRecord read_record(const std::string& model_dir) {
  const std::string path = record_path(model_dir);
  return record_from(format::read_json_file(path), path);
}

InstallRecord parse_record(const std::string& text, const std::string& where) {
  return record_from(format::parse_json_text(text, where), where);
}

namespace {

InstallRecord record_from(const json& j, const std::string& path) {
  if (format::get_string_or(j, "format", "", path) != kRecordFormat)
    fail(path, ": not a sluice install record (field 'format' must be '", kRecordFormat, "')");
  int64_t v = format::get_int(j, "version", path);
  if (v != kRecordVersion) fail(path, ": install record version ", v, " is not supported (expects ", kRecordVersion, ")");
  InstallRecord r;
  r.source = format::get_string(j, "source", path);
  r.mode = format::get_string(j, "mode", path);
  if (r.mode != "full" && r.mode != "stream") fail(path, ": mode must be 'full' or 'stream', got '", r.mode, "'");
  r.indexed = format::get_bool(j, "indexed", path);
  for (const json& f : format::get_array(j, "files", path)) r.files.push_back(file_from(f, path + ": files[]"));
  for (const json& f : format::get_array(j, "local_shards", path))
    r.local_shards.push_back(file_from(f, path + ": local_shards[]"));
  for (const json& s : format::get_array(j, "shards", path)) {
    std::string w = path + ": shards[]";
    SourceShard sh;
    sh.name = format::get_string(s, "name", w);
    if (!plain_name(sh.name)) fail(w, ": shard name '", sh.name, "' is not a plain file name");
    if (format::get_int(s, "size", w) < 0) fail(w, ": shard ", sh.name, " has a negative size");
    sh.size = uint64_t(format::get_int(s, "size", w));
    sh.sha256 = format::get_string(s, "sha256", w);
    sh.header = format::get_string(s, "header", w);
    if (sh.size < 8 + sh.header.size()) fail(w, ": shard ", sh.name, " is smaller than its header");
    parse_header(sh, cat(path, ": header of ", sh.name));
    r.shards.push_back(std::move(sh));
  }
  if (r.shards.empty()) fail(path, ": lists no shards");
  return r;
}

}  // namespace

std::map<std::string, std::string> read_sha256sums(Source& src) {
  std::map<std::string, std::string> sums;
  RemoteFile f = src.stat("SHA256SUMS");
  if (!f.found) return sums;
  std::string text = src.read_text("SHA256SUMS", 16 << 20);
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    // "<64 hex>  name" or "<64 hex> *name" (binary mode)
    if (line.size() < 67 || line[64] != ' ' || (line[65] != ' ' && line[65] != '*'))
      fail(src.where("SHA256SUMS"), ": line ", n, ": expected '<sha256>  <file name>'");
    std::string hex = line.substr(0, 64), name = line.substr(66);
    for (char& c : hex) {
      if (!std::isxdigit(static_cast<unsigned char>(c)))
        fail(src.where("SHA256SUMS"), ": line ", n, ": '", hex, "' is not a SHA-256 in hex");
      c = char(std::tolower(static_cast<unsigned char>(c)));
    }
    if (name.rfind("./", 0) == 0) name.erase(0, 2);
    sums[name] = hex;
  }
  return sums;
}

InstallRecord survey_source(Source& src, const std::string& given) {
  InstallRecord r;
  r.source = given;
  auto sums = read_sha256sums(src);
  // Every model source has a config.json object; setup asks the architecture for its expert bank.
  std::string config_text = src.read_text("config.json", 16 << 20);
  if (!format::parse_json_text(config_text, src.where("config.json")).is_object())
    fail(src.where("config.json"), ": expected a JSON object");

  std::set<std::string> shard_names;
  RemoteFile index = src.stat("model.safetensors.index.json");
  json index_json;
  if (index.found) {
    std::string text = src.read_text("model.safetensors.index.json", 256 << 20);
    std::string w = src.where("model.safetensors.index.json");
    index_json = format::parse_json_text(text, w);
    const json& j = index_json;
    const json& map = format::get_object(j, "weight_map", w);
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->is_string() || !plain_name(it->get<std::string>()))
        fail(w, ": weight_map.", it.key(), ": expected a plain shard file name, got ", format::describe_json(*it));
      shard_names.insert(it->get<std::string>());
    }
    if (shard_names.empty()) fail(w, ": weight_map lists no tensors");
  } else {
    r.indexed = false;
    shard_names.insert("model.safetensors");
  }
  for (const std::string& name : shard_names) {
    SourceShard s;
    s.name = name;
    RemoteFile f = src.stat(name);
    if (!f.found) fail(src.where(name), ": not found in the source (", r.indexed ? "listed by the index" : "no index", ")");
    s.size = f.size;
    s.sha256 = sums.count(name) ? sums[name] : f.sha256;
    if (s.size < 8) fail(src.where(name), ": ", s.size, " bytes, too short for a safetensors file");
    std::byte len_bytes[8];
    src.read_into(name, 0, 8, len_bytes);
    uint64_t header_len = 0;
    for (int i = 0; i < 8; ++i) header_len |= uint64_t(uint8_t(len_bytes[i])) << (8 * i);
    if (header_len > s.size - 8)
      fail(src.where(name), ": header length ", header_len, " runs past the end of the file (", s.size, " bytes)");
    if (header_len > (100ull << 20))
      fail(src.where(name), ": header length ", header_len, " exceeds the limit of ", 100ull << 20, " bytes");
    s.header.resize(size_t(header_len));
    src.read_into(name, 8, 8 + header_len, reinterpret_cast<std::byte*>(s.header.data()));
    parse_header(s, src.where(name));
    r.shards.push_back(std::move(s));
  }
  // Every tensor the index names must be in the shard it names (checked again after download).
  if (r.indexed) {
    const json& map = index_json["weight_map"];
    for (const auto& s : r.shards) {
      for (const auto& t : s.tensors) {
        auto it = map.find(t.name);
        if (it == map.end() || it->get<std::string>() != s.name)
          fail(src.where(s.name), ": tensor ", t.name, " is in this shard but the index ",
               it == map.end() ? std::string("does not list it") : "assigns it to " + it->get<std::string>());
      }
    }
  }
  return r;
}

}  // namespace sluice::fetch
