// The local side of a --stream install: the index of the non-expert shards, a check that every
// expert tensor is in the source as the layout needs it, and the manifest whose experts are
// placed on the homes (sparse layer files) but not local until fetched.
#pragma once
#include <string>
#include <vector>

#include "fetch/install_record.h"
#include "store/manifest.h"
#include "store/prepare.h"

namespace sluice::fetch {

// Writes model.safetensors.index.json for the kept tensors (keep[i]: names kept from shard i).
FileEntry write_stream_index(const InstallRecord& rec, const std::vector<std::vector<std::string>>& keep,
                             const std::string& dir);
void check_source_experts(const InstallRecord& rec, const store::ExpertBank& bank);
// `bank` is the one `config_text` implies (the text keys the model identity). Keeps an existing
// manifest of the same model (its experts already fetched stay local). Records are placed as
// `prepare` places them: whole, in each layer's shares by the homes' measured rates, or striped.
store::Manifest write_stream_manifest(
    const std::string& model_dir, const std::string& config_text, const store::ExpertBank& bank,
    const std::vector<store::Home>& homes,
    store::PrepareOptions::Stripe stripe = store::PrepareOptions::Stripe::Auto);

}  // namespace sluice::fetch
