// Anthropic's Messages API: POST /v1/messages (one body, or SSE events
// message_start, content_block_start/delta/stop, message_delta,
// message_stop). Text, system prompts, tool use (tools with input_schema,
// tool_choice auto/any/tool/none, tool_use and tool_result blocks), thinking
// blocks, stop_sequences; errors in Anthropic's shape. The request becomes the
// same chat as OpenAI's (chat_prompt.h); the key may come as x-api-key.
#pragma once

#include <httplib.h>

#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

void install_anthropic_routes(httplib::Server& server, ServeContext& ctx);

}  // namespace kt::serve
