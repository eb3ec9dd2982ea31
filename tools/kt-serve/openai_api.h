// The OpenAI API: POST /v1/chat/completions and /v1/completions (streaming as
// server-sent events ending with "data: [DONE]", or one JSON body), GET
// /v1/models and /v1/models/NAME.
#pragma once

#include <httplib.h>

#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

void install_openai_routes(httplib::Server& server, ServeContext& ctx);

}  // namespace kt::serve
