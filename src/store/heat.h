// Expert heat: a decayed usage count per (layer, expert), updated on every routed request,
// persisted in the model directory across runs (sluice-heat.json) and used for cache eviction
// and for placing hot replicas.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::store {

class Heat {
 public:
  Heat(int64_t layers, int64_t experts, double half_life_passes = 4096);
  // One pass over `layer` used `experts`: that layer's counts decay one step, these gain 1.
  void record(int layer, const int32_t* experts, size_t n);
  double get(int layer, int expert) const { return counts_[size_t(layer * experts_ + expert)] * scale(layer); }
  int64_t layers() const { return layers_; }
  int64_t experts() const { return experts_; }

  // Loads counts if `path` exists and matches the shape; a malformed file is an error naming it.
  void load(const std::string& path);
  void save(const std::string& path) const;  // atomic

 private:
  double scale(int layer) const { return scale_[size_t(layer)]; }
  int64_t layers_, experts_;
  double decay_;
  // Lazy decay: stored counts are divided by a per-layer factor that grows each pass.
  std::vector<double> counts_, scale_;
};

std::string heat_path(const std::string& model_dir);

}  // namespace sluice::store
