// Errors in each API's own shape, so that clients raise their own error types:
//   OpenAI: {"error": {"message", "type", "param", "code"}} with the HTTP status
//           (the openai npm client maps 400 -> BadRequestError, 401 ->
//           AuthenticationError, 404 -> NotFoundError, ...);
//   Ollama: {"error": "message"} with the HTTP status (ollama-js ResponseError);
//   Anthropic: {"type": "error", "error": {"type", "message"}} (/v1/messages).
#pragma once

#include <string>
#include <string_view>

#include <httplib.h>

namespace kt::serve {

enum class Api { OpenAI, Ollama, Anthropic };

// Ollama's API lives under /api/, Anthropic's is /v1/messages; everything
// else answers as OpenAI does.
Api api_of_path(std::string_view path);

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI's error.type
  std::string param;                           // OpenAI's error.param ("": null)
  std::string code;                            // OpenAI's error.code ("": null)
};

ApiError bad_request(std::string message, std::string param = "", std::string code = "");
ApiError with_status(int status, std::string message, std::string code = "");
ApiError model_not_found(std::string_view model);
ApiError unauthorized();
ApiError overloaded(std::string message);  // 503
ApiError server_error(std::string message);

std::string error_body(Api api, const ApiError& e);
void send_error(httplib::Response& res, Api api, const ApiError& e);

}  // namespace kt::serve
