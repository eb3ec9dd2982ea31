#include "tools/kt-serve/api_errors.h"

#include <nlohmann/json.hpp>

#include "runtime/result.h"
#include "tools/kt-serve/json_text.h"

namespace kt::serve {

Api api_of_path(std::string_view path) {
  if (path.substr(0, 5) == "/api/") return Api::Ollama;
  if (path == "/v1/messages" || path.substr(0, 13) == "/v1/messages/") return Api::Anthropic;
  return Api::OpenAI;
}

namespace {

// Anthropic's error types by status (its SDK raises by status; the type says more).
const char* anthropic_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
  }
  return status >= 500 ? "api_error" : "invalid_request_error";
}

}  // namespace

ApiError bad_request(std::string message, std::string param, std::string code) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

ApiError with_status(int status, std::string message, std::string code) {
  return ApiError{status, std::move(message), status >= 500 ? "server_error" : "invalid_request_error", "",
                  std::move(code)};
}

ApiError model_not_found(std::string_view model) {
  return ApiError{404, "the model '" + printable(model) + "' does not exist (GET /v1/models lists the one served)",
                  "invalid_request_error", "model", "model_not_found"};
}

ApiError unauthorized() {
  return ApiError{401, "a valid API key is needed: send 'Authorization: Bearer KEY' (kt-serve --api-key)",
                  "invalid_request_error", "", "invalid_api_key"};
}

ApiError overloaded(std::string message) { return ApiError{503, std::move(message), "server_error", "", "overloaded"}; }

ApiError server_error(std::string message) { return ApiError{500, std::move(message), "server_error", "", ""}; }

std::string error_body(Api api, const ApiError& e) {
  if (api == Api::Ollama) return dump_json(nlohmann::json{{"error", e.message}});
  if (api == Api::Anthropic)
    return dump_json(nlohmann::json{{"type", "error"}, {"error", {{"type", anthropic_type(e.status)}, {"message", e.message}}}});
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  return dump_json(nlohmann::json{
      {"error", {{"message", e.message}, {"type", e.type}, {"param", or_null(e.param)}, {"code", or_null(e.code)}}}});
}

void send_error(httplib::Response& res, Api api, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(api, e), "application/json");
}

}  // namespace kt::serve
