// Conversation messages, rendering input and the /save file.
#include "cli/chat_conversation.h"

#include "core/durable_file.h"
#include "format/safetensors.h"
#include "tokenizer/utf8.h"

namespace sluice::cli {

void Conversation::add_user(std::string text) { turns_.push_back({"user", std::move(text), ""}); }

void Conversation::add_assistant(std::string content, std::string reasoning) {
  turns_.push_back({"assistant", std::move(content), std::move(reasoning)});
}

void Conversation::drop_last() {
  if (!turns_.empty()) turns_.pop_back();
}

tokenizer::ChatJson Conversation::messages() const {
  tokenizer::ChatJson out = tokenizer::ChatJson::array();
  if (!system_.empty()) out.push_back({{"role", "system"}, {"content", system_}});
  for (const Turn& t : turns_) {
    tokenizer::ChatJson m = {{"role", t.role}, {"content", t.content}};
    // The model's own reasoning goes back in, for the formats whose templates keep it in history.
    if (!t.reasoning.empty()) m["reasoning_content"] = t.reasoning;
    out.push_back(std::move(m));
  }
  return out;
}

void Conversation::save(const std::string& path, const std::string& model) const {
  // Generated text may hold invalid UTF-8 (a reply cut inside a character); JSON may not.
  tokenizer::ChatJson messages = tokenizer::ChatJson::array();
  for (const auto& m : this->messages()) {
    tokenizer::ChatJson clean = tokenizer::ChatJson::object();
    for (const auto& [key, value] : m.items())
      clean[key] = tokenizer::utf8_replace_invalid(value.get<std::string>());
    messages.push_back(std::move(clean));
  }
  tokenizer::ChatJson body = {{"model", model}, {"messages", std::move(messages)}};
  write_file_durably(path, body.dump(2) + "\n");
}

}  // namespace sluice::cli
