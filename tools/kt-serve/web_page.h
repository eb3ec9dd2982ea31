// GET / (the chat page) and GET /static/PATH (its scripts, styles, vendored
// libraries and their licenses), from the files compiled in.
#pragma once

#include <httplib.h>

namespace kt::serve {

void install_web_routes(httplib::Server& server);

}  // namespace kt::serve
