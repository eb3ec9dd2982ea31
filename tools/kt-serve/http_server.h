// The HTTP server around the handlers: routes, the API key check, body size
// and time limits, errors for what no handler answers (404, 413, ...) in the
// API's own shape, a thread pool sized for every slot and queued request,
// and per-request counting (and logging with --verbose).
#pragma once

#include <httplib.h>

#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

void configure_server(httplib::Server& server, ServeContext& ctx);

}  // namespace kt::serve
