// Model-directory loader: picks tiktoken.model (+ tokenizer_config.json, Kimi K3 layout) or
// tokenizer.json, and reads the K3 added-token table; comparison of two loaded vocabularies.
#include <nlohmann/json.hpp>

#include <filesystem>

#include "core/error.h"
#include "format/json_util.h"
#include "tokenizer/token_table.h"
#include "tokenizer/tokenizer.h"

namespace sluice::tokenizer {
namespace {

// tokenizer_config.json's added_tokens_decoder: {"163584": {"content": "[BOS]", "special": true}, ...}.
std::vector<SpecialToken> read_added_tokens_decoder(const std::string& path) {
  std::string data = read_whole_file(path);
  bool too_deep = false;
  nlohmann::json root = format::parse_json_or_discarded<nlohmann::json>(data, &too_deep);
  SLUICE_CHECK(!too_deep, path, ": JSON nested deeper than the limit of ", format::kMaxJsonDepth, " levels");
  SLUICE_CHECK(!root.is_discarded() && root.is_object(), path, ": not a JSON object");
  std::vector<SpecialToken> out;
  auto it = root.find("added_tokens_decoder");
  if (it == root.end() || it->is_null()) return out;
  SLUICE_CHECK(it->is_object(), path, ": added_tokens_decoder must be an object");
  for (auto e = it->begin(); e != it->end(); ++e) {
    const std::string& key = e.key();
    SLUICE_CHECK(!key.empty() && key.size() <= 9 && key.find_first_not_of("0123456789") == std::string::npos, path,
                 ": added_tokens_decoder key '", key, "' is not a token id");
    const auto& v = e.value();
    SLUICE_CHECK(v.is_object() && v.contains("content") && v["content"].is_string(), path, ": added_tokens_decoder[\"",
                 key, "\"].content must be a string");
    bool special = !v.contains("special") || !v["special"].is_boolean() || v["special"].get<bool>();
    out.push_back(SpecialToken{std::stoi(key), v["content"].get<std::string>(), special});
  }
  return out;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& model_dir) {
  namespace fs = std::filesystem;
  fs::path dir(model_dir);
  std::error_code ec;
  if (fs::is_regular_file(dir / "tiktoken.model", ec)) {
    TiktokenOptions options;
    options.pattern = TiktokenPattern::kimi_k3;
    fs::path config = dir / "tokenizer_config.json";
    if (fs::is_regular_file(config, ec)) {
      try {
        options.specials = read_added_tokens_decoder(config.string());
      } catch (const nlohmann::json::exception& e) {
        fail(config.string(), ": unexpected JSON type: ", e.what());
      }
    }
    return load_tiktoken_file((dir / "tiktoken.model").string(), options);
  }
  if (fs::is_regular_file(dir / "tokenizer.json", ec)) return load_tokenizer_json_file((dir / "tokenizer.json").string());
  return nullptr;
}

bool same_vocabulary(const Tokenizer& a, const Tokenizer& b) {
  if (a.vocab_size() != b.vocab_size()) return false;
  const auto& sa = a.special_tokens();
  const auto& sb = b.special_tokens();
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (sa[i].id != sb[i].id || sa[i].spelling != sb[i].spelling) return false;
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    // token_bytes throws for an id a sparse vocabulary leaves unused; both must leave it unused.
    std::optional<std::string_view> x, y;
    try {
      x = a.token_bytes(id);
    } catch (const Error&) {
    }
    try {
      y = b.token_bytes(id);
    } catch (const Error&) {
    }
    if (x != y) return false;
  }
  return true;
}

}  // namespace sluice::tokenizer
