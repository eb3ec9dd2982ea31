// Handlers run on httplib's threads; nothing they throw (bad_alloc, a json
// type_error from a path we did not foresee) may escape: it becomes the API's
// 500 error and the server keeps serving.
#pragma once

#include <exception>
#include <utility>

#include <httplib.h>

#include "runtime/result.h"
#include "tools/kt-serve/api_errors.h"

namespace kt::serve {

template <class F>
httplib::Server::Handler guarded(Api api, F handler) {
  return [api, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    try {
      handler(req, res);
    } catch (const std::exception& e) {
      send_error(res, api, server_error(std::string("internal error: ") + printable(e.what(), 200)));
    } catch (...) {
      send_error(res, api, server_error("internal error"));
    }
  };
}

}  // namespace kt::serve
