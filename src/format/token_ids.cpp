// Special token ids of a config.json.
#include "format/token_ids.h"

#include "core/error.h"
#include "format/json_util.h"

namespace sluice::format {

std::vector<int32_t> token_id_list(const nlohmann::json& root, std::string_view field, int64_t vocab,
                                   const std::string& where) {
  std::vector<int32_t> out;
  if (!has_field(root, field)) return out;
  std::vector<int64_t> ids;
  if (root[std::string(field)].is_array()) ids = get_int_list(root, field, where);
  else ids.push_back(get_int(root, field, where));
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab) fail(where, ": ", field, " ", id, " is outside 0..vocab_size-1 (", vocab - 1, ")");
    out.push_back(int32_t(id));
  }
  return out;
}

int32_t optional_token_id(const nlohmann::json& root, std::string_view field, int64_t vocab, const std::string& where) {
  const std::vector<int32_t> ids = token_id_list(root, field, vocab, where);
  if (ids.size() > 1) fail(where, ": field '", field, "' must be one id");
  return ids.empty() ? -1 : ids[0];
}

}  // namespace sluice::format
