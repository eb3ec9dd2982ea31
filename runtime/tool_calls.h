// Tool calls in a model's own syntax: what its chat template writes for an
// assistant's tool_calls, and so what the model writes when it calls a tool.
// One format per template family, each in its own file:
//
//   hermes   (tool_calls_hermes.cpp)   Qwen2.5/Qwen3, Hermes: <tool_call>\n{"name": .., "arguments": {..}}\n</tool_call>
//   deepseek (tool_calls_deepseek.cpp) DeepSeek-V3/R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//                                      ```json ARGS ```<｜tool▁call▁end｜>...; V3.1: ...begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>
//   mistral  (tool_calls_mistral.cpp)  Mistral/Mixtral: [TOOL_CALLS][{"name": .., "arguments": {..}}, ..]; v11 (Small
//                                      3.x): [TOOL_CALLS]NAME[ARGS]{..}
//   json     (tool_calls.cpp)          templates with no syntax of their own: {"tool_calls": [{"name": .., "arguments": {..}}]}
//
// A format parses a finished output into content and calls (parse()), says
// which text starts a call (so a stream can hold back what may be one), can
// describe the tools in a system prompt when the template does not write
// them, and builds the grammar of "one call (or several) of these tools"
// whose arguments match each tool's JSON schema, for tool_choice required or
// a named function (the engine's constrained decoding then guarantees it).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/grammar.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/result.h"

namespace kt {

struct ToolSpec {
  std::string name;
  std::string description;
  nlohmann::ordered_json parameters;  // a JSON schema (an object schema; null: any object)
};

struct ToolCall {
  std::string id;         // as the model wrote it, or "" (the server makes one)
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ParsedToolOutput {
  std::string content;  // text outside the calls (before the first, usually)
  std::vector<ToolCall> calls;
};

class ToolCallFormat {
 public:
  virtual ~ToolCallFormat() = default;
  virtual const char* name() const = 0;
  // Text that starts a call in the output; what comes before it is content.
  virtual std::vector<std::string> triggers() const = 0;
  // A finished output: calls with arguments that are JSON objects, and the
  // rest as content. An output whose calls do not parse is all content.
  virtual ParsedToolOutput parse(std::string_view text) const = 0;
  // The text of the system prompt section that describes the tools and this
  // syntax, for templates that do not write tools themselves.
  virtual std::string tools_prompt(const std::vector<ToolSpec>& tools) const;
  // The rule of one or more calls (parallel) of the given tools.
  Result<uint32_t> calls_rule(GrammarBuilder& b, const std::vector<ToolSpec>& tools, bool parallel) const;
  Result<Grammar> calls_grammar(const std::vector<ToolSpec>& tools, bool parallel) const;
  // Whether the syntax uses control tokens (the engine must then render them).
  virtual bool uses_special_tokens() const { return false; }

 protected:
  // One call of one of the tools (their alternatives), written by each format.
  virtual Result<uint32_t> one_call_rule(GrammarBuilder& b, JsonSchemaCompiler& c, const std::vector<ToolSpec>& tools,
                                         const std::vector<uint32_t>& args) const = 0;
  // The text around and between calls: open, separator, close.
  virtual std::string calls_open() const { return ""; }
  virtual std::string calls_separator() const { return ""; }
  virtual std::string calls_close() const { return ""; }
};

// The format a chat template's source writes tool calls in (json when it
// has none of the known syntaxes).
std::unique_ptr<ToolCallFormat> tool_call_format_for(std::string_view template_source);
std::unique_ptr<ToolCallFormat> make_hermes_tool_calls();
std::unique_ptr<ToolCallFormat> make_deepseek_tool_calls(bool v3_1);
std::unique_ptr<ToolCallFormat> make_mistral_tool_calls(bool v11);
std::unique_ptr<ToolCallFormat> make_json_tool_calls();

// Helpers the formats share.
namespace tool_calls_detail {
// The end of the JSON value starting at text[pos] (after whitespace), by
// scanning brackets and strings; npos when it does not end in text.
size_t json_value_end(std::string_view text, size_t pos);
// text as a JSON object (its compact text in *out); false otherwise.
bool object_text(std::string_view text, std::string* out);
// The grammar of {"name": "<name>", "arguments": ARGS} for each tool.
Result<uint32_t> name_arguments_object(GrammarBuilder& b, JsonSchemaCompiler& c, const std::vector<ToolSpec>& tools,
                                       const std::vector<uint32_t>& args, const char* args_key = "arguments");
// A call object {"name": .., "arguments"/"parameters": ..} from JSON.
bool call_from_json(const nlohmann::ordered_json& j, ToolCall* out);
}  // namespace tool_calls_detail

}  // namespace kt
