// One generation request as one HTTP response: the request goes to the
// engine, and the handler's thread (httplib's) turns the engine's events into
// the response body as they come, through a ResponseFormat (an API's
// streaming chunks, or its one JSON body when not streaming).
//
// The body is always sent chunked and written from a content provider that
// wakes every 100 ms, so a client that goes away is noticed while it waits
// (httplib checks the socket between calls) or when a write fails, and its
// request is cancelled: the engine frees its slot at the next step.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <httplib.h>

#include "runtime/engine.h"
#include "tools/kt-serve/api_errors.h"

namespace kt::serve {

class ResponseFormat {
 public:
  virtual ~ResponseFormat() = default;
  virtual const char* content_type() const = 0;
  // Bytes to send as soon as the request is accepted ("" for none).
  virtual std::string start() { return ""; }
  // Bytes to send for an event ("" for none): the last event has done set.
  virtual std::string on_event(const EngineEvent& e) = 0;
};

// Submits the request and sets res up to stream the formatted events; or,
// when the engine refuses it, returns why (and res is untouched).
std::optional<Rejection> respond_with_generation(httplib::Response& res, Engine& engine, EngineRequest request,
                                                 std::unique_ptr<ResponseFormat> format);

// The status and message a refusal gets: 503 when the server is full or
// stopping, 400 for the prompt's faults.
ApiError rejection_error(const Rejection& r);

}  // namespace kt::serve
