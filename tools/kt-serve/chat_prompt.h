// Chat messages to prompt tokens: through the model's chat template (from the
// GGUF, carried by the plan, or --chat-template), then the tokenizer with the
// BOS rule kt-exec uses (runtime/prompt.h).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/kt-serve/api_errors.h"
#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

// messages: [{"role": ..., "content": string}, ...], checked by the API's
// parser. Errors are the client's (400): no template, or the template refused
// the conversation (raise_exception, a step budget).
struct ChatPrompt {
  std::vector<int32_t> tokens;
  std::optional<ApiError> error;
};
ChatPrompt chat_prompt(const ServeContext& ctx, const nlohmann::ordered_json& messages);

}  // namespace kt::serve
