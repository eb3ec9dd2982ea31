// The assistant's output as the chat APIs return it, built as the text
// streams in: reasoning (a leading <think> block: reasoning_content /
// thinking, runtime/reasoning_split.h), content, and tool calls in the
// model's syntax (runtime/tool_calls.h). Content that may be the start of a
// tool call is held back; from a call's first marker on, the text is kept and
// parsed when the output ends (an output whose calls do not parse is
// content after all). Each call gets an id of nine alphanumerics (what
// Mistral's templates need when the client sends it back).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/reasoning_split.h"
#include "runtime/tool_calls.h"

namespace kt::serve {

class ChatOutput {
 public:
  // tools: the format to find calls in, or null (no tools in the request).
  ChatOutput(bool split_reasoning, bool reasoning_open, const ToolCallFormat* tools);

  struct Delta {
    std::string reasoning, content;
    bool empty() const { return reasoning.empty() && content.empty(); }
  };
  Delta push(std::string_view text);
  // The end of the output: what was held back, and the calls.
  Delta finish(std::vector<ToolCall>* calls);
  // One engine event's text: push(text), and when the event is the last,
  // finish(calls) too, in one delta.
  Delta step(std::string_view text, bool done, std::vector<ToolCall>* calls);

 private:
  void content(std::string_view text, Delta* out);

  bool split_;
  ReasoningSplitter reasoning_;
  const ToolCallFormat* tools_;
  std::vector<std::string> triggers_;
  std::string pending_;  // content that may begin a call
  std::string call_text_;  // from the first call marker on
  bool in_call_ = false;
};

// A random id of nine alphanumerics.
std::string tool_call_id();

}  // namespace kt::serve
