// A chat request's conversation (OpenAI's shape: messages with tool_calls
// and tool results, tool definitions) as a model's chat template wants it.
//
// Templates disagree on details that clients do not know about, so each is
// probed once, by rendering small conversations (probe_chat_template):
// whether it writes the tool definitions, whether tool-call arguments must be
// objects (most templates apply tojson to them; OpenAI sends a JSON string),
// whether a null content prints "None", whether tool-call ids must be nine
// alphanumerics (Mistral's templates raise otherwise). chat_template_context()
// then adapts the conversation: arguments parsed into objects, null content
// as "", ids mapped to nine characters (the same id always to the same nine),
// and, when the template does not write tools, the tool-call format's own
// description of them (tool_calls.h) added to the system message.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/chat_template.h"
#include "runtime/result.h"
#include "runtime/tool_calls.h"

namespace kt {

struct ChatTemplateCaps {
  bool renders_tools = false;        // writes the `tools` variable
  bool renders_tool_calls = false;   // writes an assistant message's tool_calls
  bool object_arguments = false;     // wants function.arguments as an object
  bool empty_for_null = false;       // prints None for a null content
  bool nine_char_ids = false;        // tool-call ids must be nine alphanumerics
};

ChatTemplateCaps probe_chat_template(const ChatTemplate& tpl, const std::string& bos, const std::string& eos);

// OpenAI's tools ([{"type": "function", "function": {name, description,
// parameters}}]) checked: errors name the field ("tools[2].function.name ...").
Result<std::vector<ToolSpec>> parse_tool_specs(const nlohmann::ordered_json& tools);

// The template's variables. messages: [{role, content: string or null,
// tool_calls: [{id, type, function: {name, arguments: JSON text}}],
// tool_call_id, name, reasoning_content}] as the API gave them; tools: the
// request's list (empty: none; the variable is then left out); extra: more
// variables (enable_thinking, ...).
nlohmann::ordered_json chat_template_context(const ChatTemplateCaps& caps, const ToolCallFormat& format,
                                             nlohmann::ordered_json messages, const nlohmann::ordered_json& tools,
                                             const std::vector<ToolSpec>& specs, bool add_generation_prompt,
                                             const std::string& bos, const std::string& eos,
                                             const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

// An id of nine alphanumerics (kept when it is one already).
std::string nine_char_id(const std::string& id);

}  // namespace kt
