// Ollama request bodies to engine requests: model, messages or prompt,
// "options" (temperature, top_k, top_p, min_p, seed, num_predict, stop,
// repeat_penalty, ...) with Ollama's defaults; tools (assistant tool_calls
// and tool messages in the history), format ("json" or a JSON schema:
// constrained decoding), think (message.thinking), logprobs/top_logprobs.
// Features kt-serve does not implement (images, suffix) are refused rather
// than ignored.
#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "tools/kt-serve/api_errors.h"
#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

struct OllamaRequest {
  GenerationParams gen;
  bool stream = true;
  bool empty = false;  // no messages / empty prompt: Ollama answers "load" at once
  std::vector<int32_t> prompt;
  bool split_reasoning = false;  // think: true
  bool reasoning_open = false;
  bool parse_tools = false;
};

// body: the request (keys sorted); ordered: the same with keys as written.
std::optional<ApiError> read_ollama_chat(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                                         const ServeContext& ctx, OllamaRequest& out);
std::optional<ApiError> read_ollama_generate(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                                             const ServeContext& ctx, OllamaRequest& out);

}  // namespace kt::serve
