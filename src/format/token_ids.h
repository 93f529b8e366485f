// Special token ids in a config.json (bos/eos/pad): one id or a list, each checked against the
// vocabulary, shared by the architectures' config parsers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace sluice::format {

// The ids of `field` (absent or null: none). Throws naming the field for an id outside 0..vocab-1.
std::vector<int32_t> token_id_list(const nlohmann::json& root, std::string_view field, int64_t vocab,
                                   const std::string& where);
// One id or -1 when absent; a list of more than one is refused.
int32_t optional_token_id(const nlohmann::json& root, std::string_view field, int64_t vocab, const std::string& where);

}  // namespace sluice::format
