// The conversation of `sluice chat`: OpenAI-shaped messages (the system prompt first when there is
// one, then user and assistant turns with their reasoning), rendered whole in the model's chat
// format for every turn, and saved as the JSON body of a chat completion request.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/chat.h"

namespace sluice::cli {

class Conversation {
 public:
  explicit Conversation(std::string system_prompt) : system_(std::move(system_prompt)) {}
  const std::string& system() const { return system_; }
  void set_system(std::string text) { system_ = std::move(text); }
  void add_user(std::string text);
  void add_assistant(std::string content, std::string reasoning);
  // Takes back the last message (a user turn that could not run).
  void drop_last();
  // Forgets every turn; the system prompt stays.
  void clear() { turns_.clear(); }
  size_t size() const { return turns_.size(); }
  // The messages as the renderers and the OpenAI API take them.
  tokenizer::ChatJson messages() const;
  // {"model": model, "messages": [...]} written to `path` atomically (temporary name, fsync,
  // rename): a file that exists is a whole conversation.
  void save(const std::string& path, const std::string& model) const;

 private:
  struct Turn {
    std::string role, content, reasoning;
  };
  std::string system_;
  std::vector<Turn> turns_;
};

}  // namespace sluice::cli
