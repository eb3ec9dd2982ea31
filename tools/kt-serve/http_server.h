// The HTTP server around the handlers: routes, the API key check, body size
// and time limits, errors for what no handler answers (404, 413, ...) in the
// API's own shape, a thread pool sized for every slot and queued request,
// and per-request counting (and logging with --verbose).
#pragma once

#include <httplib.h>

#include "tools/kt-serve/serve_context.h"

namespace kt::serve {

void configure_server(httplib::Server& server, ServeContext& ctx);

// Binds host:port (port 0: any free port) and returns the port, or -1.
// httplib (Debian's compiled 0.11) listens with a backlog of 5: a burst of
// more new connections than that (16 clients starting at once) overflows the
// accept queue, the kernel drops their SYNs, and each such client waits for
// its one-second retransmit. So the bound socket is listened on again with
// the system's maximum backlog (Linux takes a second listen() as a new one).
int bind_server(httplib::Server& server, const std::string& host, int port);

}  // namespace kt::serve
