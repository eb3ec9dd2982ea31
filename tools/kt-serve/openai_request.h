// OpenAI request bodies to engine requests: every field the endpoints take,
// type- and range-checked, with OpenAI's defaults; fields kt-serve does not
// implement (tools, logprobs, n > 1, ...) are refused rather than ignored.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "tools/kt-serve/api_errors.h"
#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

struct OpenAiRequest {
  GenerationParams gen;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::vector<int32_t> prompt;
};

// POST /v1/chat/completions: messages through the chat template.
std::optional<ApiError> read_chat_request(const nlohmann::json& body, const ServeContext& ctx, OpenAiRequest& out);
// POST /v1/completions: the prompt as text or token ids.
std::optional<ApiError> read_completion_request(const nlohmann::json& body, const ServeContext& ctx,
                                                OpenAiRequest& out);

}  // namespace kt::serve
