// Reasoning models (DeepSeek-R1 and its distills, Qwen3, QwQ) write their
// reasoning in a <think>...</think> block before the answer. This splits a
// streamed output into the two, as DeepSeek's API (reasoning_content) and
// Ollama (message.thinking) return them: only a block at the very start of
// the output is reasoning; whitespace between </think> and the answer goes.
// Many templates open the block in the generation prompt (".. <think>\n"),
// so the output starts inside it: prompt_opens_reasoning() tells.
// Incremental: a piece that could be the start of a tag is held back until
// the next one decides; flush() gives what is left when the output ends (an
// unclosed block is all reasoning).
#pragma once

#include <string>
#include <string_view>

namespace kt {

// Whether the prompt's last <think> comes after its last </think>.
bool prompt_opens_reasoning(std::string_view prompt);

class ReasoningSplitter {
 public:
  struct Piece {
    std::string reasoning, content;
  };
  explicit ReasoningSplitter(bool starts_inside);

  Piece push(std::string_view text);
  Piece flush();

 private:
  enum class State { Start, Inside, AfterClose, Answer };
  State state_;
  std::string held_;
};

}  // namespace kt
