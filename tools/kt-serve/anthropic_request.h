// Anthropic's Messages request (POST /v1/messages) to an engine request:
// model, max_tokens (required), system, messages of text, thinking,
// tool_use and tool_result blocks, tools with input_schema, tool_choice
// (auto, any, tool, none), thinking, stop_sequences, temperature, top_p,
// top_k. The conversation goes through the same chat as OpenAI's
// (chat_prompt.h). Blocks kt-serve does not implement (images, documents,
// server tools) are refused rather than ignored.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "tools/kt-serve/api_errors.h"
#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

struct MessagesRequest {
  GenerationParams gen;
  bool stream = false;
  std::vector<int32_t> prompt;
  bool split_reasoning = false, reasoning_open = false, parse_tools = false;
  std::vector<std::string> stops;
};

// body: the request (keys sorted); ordered: the same with keys as written.
std::optional<ApiError> read_messages(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                                      const ServeContext& ctx, MessagesRequest& out);

}  // namespace kt::serve
