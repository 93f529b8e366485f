// Helpers for model tests: temporary directories and tiny checkpoints written by make-tiny.
#pragma once
#include <filesystem>
#include <string>
#include <unistd.h>

#include "model/tiny_checkpoint.h"

namespace sluice::testing {

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() /
            ("sluice-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

inline model::TinySpec tiny_k3_spec() { return model::TinySpec{}; }

// A kimi_linear spec that differs from the K3 default in most dimensions.
inline model::TinySpec tiny_linear_spec() {
  model::TinySpec s;
  s.arch = format::KimiArch::KimiLinear;
  s.hidden = 48;
  s.layers = 5;
  s.mla_layers = {2, 5};
  s.kda_heads = 3;
  s.kda_head_dim = 8;
  s.heads = 3;
  s.q_lora = 0;
  s.kv_lora = 16;
  s.nope = 8;
  s.rope = 4;
  s.v_dim = 8;
  s.dense_inter = 64;
  s.experts = 12;
  s.top_k = 3;
  s.shared = 1;
  s.moe_inter = 24;
  s.expert_groups = 3;
  s.topk_groups = 2;
  s.routed_scaling = 2.0;
  s.shards = 1;
  return s;
}

}  // namespace sluice::testing
