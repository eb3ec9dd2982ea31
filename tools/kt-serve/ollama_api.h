// The Ollama API: POST /api/chat and /api/generate (newline-delimited JSON
// when streaming, the default; one JSON body with "stream": false), GET
// /api/tags, /api/ps and /api/version, POST /api/show.
#pragma once

#include <httplib.h>

#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

void install_ollama_routes(httplib::Server& server, ServeContext& ctx);

}  // namespace kt::serve
