// The per-format mapping of chat request fields onto ChatOptions (chat_options.h).
#include "serve/chat_options.h"

namespace sluice::serve {
namespace {

using tokenizer::ChatFormat;

// Formats whose templates cannot say "call no tool": tool_choice none is refused. Required and
// named calls and response formats need no template control: guided decoding enforces them
// (runtime/guided_reply.h).
void refuse_tool_choice_none(const ChatRequest& c, const std::string& model) {
  if (c.tool_choice == "none")
    invalid("tool_choice", model + "'s chat format has no tool_choice control for 'none'; give 'auto', 'required' or "
            "leave it out.", "unsupported_value");
}

}  // namespace

tokenizer::ChatOptions chat_options_for(ChatFormat format, const ChatRequest& c) {
  tokenizer::ChatOptions co;
  co.tools = c.tools;
  const std::string& effort = c.reasoning_effort;
  switch (format) {
    case ChatFormat::kimi_k3:
      co.thinking = effort != "none";
      if (effort == "medium")
        invalid("reasoning_effort", "Kimi K3's thinking efforts are low, high and max ('none' turns thinking off).",
                "unsupported_value");
      if (co.thinking) co.thinking_effort = effort;
      co.tool_choice = c.tool_choice;
      co.response_format = c.response_format;
      break;
    case ChatFormat::qwen3:
      co.thinking = effort != "none";
      if (!effort.empty() && effort != "none")
        invalid("reasoning_effort", "Qwen3 models have no thinking effort; give 'none' (thinking off) or leave it out.",
                "unsupported_value");
      refuse_tool_choice_none(c, "Qwen3");
      break;
    case ChatFormat::gpt_oss:
      if (effort == "none" || effort == "max")
        invalid("reasoning_effort", "gpt-oss always reasons; its reasoning efforts are low, medium and high.",
                "unsupported_value");
      co.reasoning_effort = effort;
      refuse_tool_choice_none(c, "gpt-oss");
      break;
    case ChatFormat::deepseek_v3:
    case ChatFormat::deepseek_v3_0324:
    case ChatFormat::kimi_k2: {
      const std::string model = format == ChatFormat::kimi_k2 ? "Kimi-K2-Instruct" : "DeepSeek-V3";
      if (!effort.empty() && effort != "none")
        invalid("reasoning_effort", model + " does not reason; give 'none' or leave reasoning_effort out.",
                "unsupported_value");
      co.thinking = false;
      refuse_tool_choice_none(c, model);
      break;
    }
    case ChatFormat::kimi_k2_thinking:
      if (!effort.empty())
        invalid("reasoning_effort",
                "Kimi-K2-Thinking always thinks and has no effort setting; leave reasoning_effort out.",
                "unsupported_value");
      refuse_tool_choice_none(c, "Kimi-K2-Thinking");
      break;
  }
  return co;
}

}  // namespace sluice::serve
