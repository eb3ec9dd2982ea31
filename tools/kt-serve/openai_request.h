// OpenAI request bodies to engine requests: every field the endpoints take,
// type- and range-checked, with OpenAI's defaults; fields kt-serve does not
// implement (n > 1, logit_bias, audio, images, ...) are refused rather than
// ignored. Chat requests may carry tools (tool_choice, parallel_tool_calls,
// assistant tool_calls and tool messages in the history), response_format
// (json_object, json_schema: constrained decoding), logprobs/top_logprobs,
// reasoning_format and chat_template_kwargs (llama.cpp's).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "tools/kt-serve/api_errors.h"
#include "tools/kt-serve/chat_prompt.h"
#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

struct OpenAiRequest {
  GenerationParams gen;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::vector<int32_t> prompt;
  // Chat: how to read the output.
  bool split_reasoning = false;
  bool reasoning_open = false;
  bool parse_tools = false;
  bool forced_tool_call = false;  // tool_choice required or named
};

// POST /v1/chat/completions: messages through the chat template. body is the
// request (keys sorted), ordered the same body with keys in written order.
std::optional<ApiError> read_chat_request(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                                          const ServeContext& ctx, OpenAiRequest& out);
// POST /v1/completions: the prompt as text or token ids.
std::optional<ApiError> read_completion_request(const nlohmann::json& body, const nlohmann::ordered_json& ordered,
                                                const ServeContext& ctx, OpenAiRequest& out);

}  // namespace kt::serve
