// Decayed usage counts with lazy per-layer decay, and their JSON file.
#include "store/heat.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/durable_file.h"
#include "core/error.h"
#include "format/json_util.h"
#include "format/safetensors.h"

namespace sluice::store {

Heat::Heat(int64_t layers, int64_t experts, double half_life_passes)
    : layers_(layers), experts_(experts), decay_(std::pow(0.5, 1.0 / half_life_passes)),
      counts_(size_t(layers * experts), 0.0), scale_(size_t(layers), 1.0) {}

void Heat::record(int layer, const int32_t* experts, size_t n) {
  double& s = scale_[size_t(layer)];
  s *= decay_;
  if (s < 1e-100) {  // renormalise before underflow
    for (int64_t e = 0; e < experts_; ++e) counts_[size_t(layer * experts_ + e)] *= s;
    s = 1.0;
  }
  for (size_t i = 0; i < n; ++i) counts_[size_t(layer * experts_ + experts[i])] += 1.0 / s;
}

std::string heat_path(const std::string& model_dir) { return model_dir + "/sluice-heat.json"; }

void Heat::load(const std::string& path) {
  if (!std::filesystem::exists(path)) return;
  nlohmann::json j = format::read_json_file(path);
  if (format::get_string_or(j, "format", "", path) != "sluice-heat")
    fail(path, ": not a sluice heat file (field 'format' must be 'sluice-heat')");
  if (format::get_int(j, "layers", path) != layers_ || format::get_int(j, "experts", path) != experts_)
    fail(path, ": heat file shape differs from the model (", layers_, " layers x ", experts_, " experts)");
  std::vector<double> v = format::get_number_list(j, "counts", path);
  if (v.size() != counts_.size()) fail(path, ": 'counts' must have layers*experts entries");
  for (double x : v)
    if (!(x >= 0)) fail(path, ": 'counts' entries must be non-negative numbers");
  counts_ = std::move(v);
  std::fill(scale_.begin(), scale_.end(), 1.0);
}

void Heat::save(const std::string& path) const {
  std::vector<double> v(counts_.size());
  for (int64_t l = 0; l < layers_; ++l)
    for (int64_t e = 0; e < experts_; ++e) v[size_t(l * experts_ + e)] = get(int(l), int(e));
  nlohmann::json j = {{"format", "sluice-heat"}, {"version", 1}, {"layers", layers_}, {"experts", experts_}, {"counts", v}};
  write_file_durably(path, j.dump() + "\n");
}

}  // namespace sluice::store
