// Manifest format list and migrations (v1 -> v2 -> v3).
#include "fetch/upgrade.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/durable_file.h"
#include "core/error.h"
#include "format/json_util.h"
#include "format/safetensors.h"
#include "store/manifest.h"

namespace sluice::fetch {
namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<FormatVersion>& manifest_versions() {
  static const std::vector<FormatVersion> v = {
      {1, "homes, per-expert holders (home, file, offset, length, xxh3) and measured bandwidth (sluice 0.1, `prepare`)"},
      {2, "per-holder `local` flag: false for experts of a --stream install not fetched yet"},
      {3, "per-holder `at`: where a holder's part starts in its record (records striped across homes)"},
  };
  return v;
}

namespace {

std::string read_local(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One migration step: turns the JSON of version `from` into version from + 1.
using Step = std::function<void(json&, const std::string& where)>;

const std::vector<std::pair<int, Step>>& steps() {
  static const std::vector<std::pair<int, Step>> s = {
      // v1 -> v2: every v1 expert was packed by prepare, so every holder is local; `local`
      // defaults to true when absent, so only the version changes.
      {1, [](json& j, const std::string&) { j["version"] = 2; }},
      // v2 -> v3: every v2 holder holds its whole record, which is what an absent `at` means.
      {2, [](json& j, const std::string&) { j["version"] = 3; }},
  };
  return s;
}

}  // namespace

UpgradeResult upgrade_install(const std::string& model_dir, const store::ExpertBank& bank) {
  static_assert(store::kManifestVersion == 3, "add the migration step and format entry for the new version");
  const std::string path = store::manifest_path(model_dir);
  if (!fs::exists(path))
    fail(model_dir, ": no expert manifest (", path, "); nothing to upgrade (run `sluice setup` or `sluice prepare`)");
  const std::string text = read_local(path);
  json j = format::parse_json_text(text, path);
  if (!j.is_object() || format::get_string_or(j, "format", "", path) != store::kManifestFormat)
    fail(path, ": unknown layout: not a sluice expert manifest (field 'format' must be '", store::kManifestFormat,
         "'); refusing to change it");
  int64_t v = format::get_int(j, "version", path);
  const int current = manifest_versions().back().version;
  if (v > current)
    fail(path, ": manifest version ", v, " is newer than this sluice knows (", current, "); use a newer sluice");
  if (v < manifest_versions().front().version)
    fail(path, ": unknown layout: manifest version ", v, " was never written by sluice; refusing to change it");
  UpgradeResult r;
  r.from = r.to = int(v);
  if (v == current) return r;
  for (int at = int(v); at < current; ++at) {
    bool found = false;
    for (const auto& [from, step] : steps())
      if (from == at) {
        step(j, path);
        found = true;
      }
    if (!found) fail(path, ": no migration from manifest version ", at, " (this sluice cannot upgrade it)");
  }
  // Validate the result as the engine will read it, under a temporary name, before anything moves.
  const std::string config_text = read_local(model_dir + "/config.json");
  const std::string id = store::model_identity(config_text, bank.layout);
  const std::string candidate = path + ".upgrade-tmp";
  write_file_durably(candidate, j.dump(1) + "\n");
  try {
    store::read_manifest(candidate, bank, id);
  } catch (const Error& e) {
    fs::remove(candidate);
    fail(path, ": the upgraded manifest does not validate (", e.what(), "); nothing was changed");
  }
  r.backup = cat(path, ".v", v, ".bak");
  if (fs::exists(r.backup) && read_local(r.backup) != text) r.backup = cat(path, ".v", v, ".", ::time(nullptr), ".bak");
  write_file_durably(r.backup, text);
  fs::rename(candidate, path);
  r.to = current;
  return r;
}

}  // namespace sluice::fetch
