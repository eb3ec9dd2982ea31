// Chat messages to prompt tokens: through the model's chat template (from the
// GGUF, carried by the plan, or --chat-template), then the tokenizer with the
// BOS rule kt-exec uses (runtime/prompt.h). Tools go through the template
// too (runtime/chat_conversation.h adapts the conversation to what the
// template wants); tool_choice required or a named function becomes the
// grammar of a call in the model's own syntax (runtime/tool_calls.h), for the
// engine's constrained decoding.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/grammar.h"
#include "runtime/tool_calls.h"
#include "tools/kt-serve/api_errors.h"
#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

enum class ToolChoice { Auto, None, Required, Named };

// A conversation in OpenAI's shape, as the API parsers build it.
struct ChatInput {
  // [{role, content: string or null, tool_calls: [{id, type, function: {name,
  // arguments: JSON text}}], tool_call_id, name, reasoning_content}]
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as the request gave them
  std::vector<ToolSpec> specs;                                     // the same, checked
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string named_tool;     // ToolChoice::Named
  bool parallel_tool_calls = true;
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // more template variables
};

// Errors are the client's (400): no template, the template refused the
// conversation (raise_exception, a step budget), a tool schema the grammar
// compiler refuses.
struct ChatPrompt {
  std::vector<int32_t> tokens;
  std::string text;                        // the rendered prompt
  bool reasoning_open = false;             // the prompt ends inside a <think> block
  bool parse_tools = false;                // the output may hold tool calls
  bool render_special = false;             // the tool-call syntax uses control tokens
  std::shared_ptr<const Grammar> grammar;  // tool_choice required or named: the calls' grammar
  std::optional<ApiError> error;
};
ChatPrompt chat_prompt(const ServeContext& ctx, const ChatInput& in);

// The request's "tools" (OpenAI's function tools, as Ollama sends them too)
// into in.tools and in.specs; absent or null: none.
std::optional<ApiError> read_tools(const nlohmann::ordered_json& request, ChatInput& in);

}  // namespace kt::serve
