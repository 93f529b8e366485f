// What `sluice info` reports of a model directory, as JSON (also what `sluice doctor --model`
// starts from): architecture, parameters, bytes and number formats by tensor class, the expert
// bank, tokenizer and chat format, the checkpoint's shards, and what `prepare` laid out where.
// Nothing is loaded: the config's tensor list and bank, the tokenizer files and the manifest.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace sluice::cli {

nlohmann::json model_facts(const std::string& model_dir);

// "12.3 GB", "512 B": decimal units (GB = 1e9, as --cache-gb).
std::string human_bytes(double bytes);
// "1.23 B", "150 M", "6.1 K", "12".
std::string human_count(double n);

}  // namespace sluice::cli
