// The architectures sluice runs, found by config.json's model_type: one entry per file set in
// src/model/arch/, carrying every hook the layers below the front ends need (loader, expert bank,
// tensor roster, make-tiny's config writer); `sluice info` and make-tiny (its --arch list and
// writer) read this table (docs/HOWTO-add-architecture.md). Front ends and the
// engine load a Target through here; store/ and fetch/ get the expert-bank description of a
// checkpoint through here (they never parse a model config).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "device/device.h"
#include "model/target.h"
#include "model/tensor_list.h"
#include "store/expert_bank.h"

namespace sluice::model {

struct TinyMoeSpec;
struct TinyConfig;

struct LoadOptions {
  std::string dir;                      // config.json + safetensors
  device::Device* device = nullptr;    // null: the process-wide CPU device
  // false: the checkpoint's routed-expert tensors are not touched and an expert provider must be
  // set before the first pass (the streaming store).
  bool resident_experts = true;
};

struct Architecture {
  const char* family;                          // "kimi", "qwen3"
  std::vector<std::string> model_types;        // what config.json's model_type may say
  std::unique_ptr<Target> (*load)(const LoadOptions&);
  // The expert bank a config implies (an empty bank for a dense model).
  store::ExpertBank (*expert_bank)(const std::string& config_text, const std::string& where);
  // Every tensor of a checkpoint of that config, in the order make-tiny writes them (the tensor
  // list with the bank's expert tensors expanded).
  std::vector<TensorSpec> (*roster)(const std::string& config_text, const std::string& where);
  // make-tiny: the config.json of a small random checkpoint of spec.arch (one of model_types),
  // whose roster make-tiny then writes (model/tiny_checkpoint.h). Null: make-tiny does not write
  // this architecture.
  TinyConfig (*tiny)(const TinyMoeSpec& spec) = nullptr;
};

// The registry entry's expert_bank and roster from an architecture's config parser, tensor list and
// expert bank (functions of a parsed config).
template <auto Parse, auto Bank>
store::ExpertBank bank_from_text(const std::string& config_text, const std::string& where) {
  return Bank(Parse(config_text, where));
}
template <auto Parse, auto Tensors, auto Bank>
std::vector<TensorSpec> roster_from_text(const std::string& config_text, const std::string& where) {
  const auto c = Parse(config_text, where);
  return Tensors(c, nullptr).expanded(Bank(c));
}

// Every registered architecture (registry.cpp lists them).
const std::vector<const Architecture*>& architectures();
// config.json's model_type (the root's). Throws naming `where` when it is missing.
std::string model_type_of(const std::string& config_text, const std::string& where);
// The architecture for a model_type; throws naming it and listing the known ones.
const Architecture& find_architecture(const std::string& model_type, const std::string& where);

// Reads dir/config.json, finds the architecture and loads the model on the device.
std::unique_ptr<Target> load_target(const LoadOptions& opt);
std::unique_ptr<Target> load_target(const std::string& dir);
// The expert bank of a config.json text (or of dir/config.json).
store::ExpertBank expert_bank_from_config(const std::string& config_text, const std::string& where);
store::ExpertBank expert_bank_of(const std::string& dir);

}  // namespace sluice::model
