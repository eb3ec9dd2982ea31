// The OpenAI endpoints: request bodies (openai_request.cpp) to the engine,
// events back as OpenAI's chunks or bodies.
#include "tools/kt-serve/openai_api.h"

#include "tools/kt-serve/generation_response.h"
#include "tools/kt-serve/handler_guard.h"
#include "tools/kt-serve/json_text.h"
#include "tools/kt-serve/openai_request.h"
#include "tools/kt-serve/response_stamps.h"

namespace kt::serve {

namespace {

using json = nlohmann::ordered_json;  // responses keep their fields in the order written

enum class Kind { Chat, Completion };

json usage_json(const EngineEvent& e) {
  return {{"prompt_tokens", e.prompt_tokens},
          {"completion_tokens", e.completion_tokens},
          {"total_tokens", e.prompt_tokens + e.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", e.cached_tokens}}}};
}

// llama.cpp's "timings" extension: what a client needs to show tokens/s.
json timings_json(const EngineEvent& e) {
  const double decode_ms = e.decode_s * 1e3;
  // The first token comes out of the prefill step; the others are decode steps.
  const int64_t decoded = std::max<int64_t>(e.completion_tokens - 1, 0);
  return {{"prompt_n", e.prompt_tokens - e.cached_tokens},
          {"cache_n", e.cached_tokens},
          {"prompt_ms", e.prefill_s * 1e3},
          {"predicted_n", e.completion_tokens},
          {"predicted_ms", decode_ms},
          {"predicted_per_second", decode_ms > 0 ? double(decoded) / e.decode_s : 0.0},
          {"queue_ms", e.queue_s * 1e3}};
}

json finish_reason(const EngineEvent& e) { return finish_reason_name(e.finish); }

ApiError event_error(const EngineEvent& e) {
  if (e.finish == FinishReason::Cancelled)
    return overloaded(e.error.empty() ? std::string("the request was cancelled") : e.error);
  return server_error(e.error);
}

// Both endpoints' responses, as SSE chunks or one body.
class OpenAiFormat final : public ResponseFormat {
 public:
  OpenAiFormat(Kind kind, const ServeContext& ctx, bool stream, bool include_usage)
      : kind_(kind), stream_(stream), include_usage_(include_usage), model_(ctx.model.name),
        id_(random_id(kind == Kind::Chat ? "chatcmpl-" : "cmpl-")), created_(unix_now()) {}

  const char* content_type() const override { return stream_ ? "text/event-stream" : "application/json"; }

  std::string start() override {
    if (!stream_ || kind_ != Kind::Chat) return "";
    return sse(chunk({{"role", "assistant"}, {"content", ""}}, json()));
  }

  std::string on_event(const EngineEvent& e) override {
    if (!stream_) {
      text_ += e.text;
      return e.done ? body(e) : "";
    }
    std::string out;
    if (!e.text.empty()) out += sse(chunk(kind_ == Kind::Chat ? json{{"content", e.text}} : json(e.text), json()));
    if (!e.done) return out;
    if (e.finish == FinishReason::Error || e.finish == FinishReason::Cancelled) {
      out += "data: " + error_body(Api::OpenAI, event_error(e)) + "\n\n";
    } else {
      json last = chunk(kind_ == Kind::Chat ? json::object() : json(""), finish_reason(e));
      last["timings"] = timings_json(e);
      out += sse(last);
      if (include_usage_) {
        json usage = chunk(json(), json());
        usage["choices"] = json::array();
        usage["usage"] = usage_json(e);
        out += sse(usage);
      }
    }
    return out + "data: [DONE]\n\n";
  }

 private:
  static std::string sse(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

  json envelope(const char* object) const {
    return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}, {"system_fingerprint", "kt"}};
  }

  // A streaming chunk: delta is the chat delta object or the completion text.
  json chunk(const json& delta, const json& reason) const {
    json c = envelope(kind_ == Kind::Chat ? "chat.completion.chunk" : "text_completion");
    json choice = {{"index", 0}};
    if (kind_ == Kind::Chat)
      choice["delta"] = delta.is_null() ? json::object() : delta;
    else
      choice["text"] = delta.is_null() ? json("") : delta;
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = reason;
    c["choices"] = json::array({choice});
    return c;
  }

  std::string body(const EngineEvent& e) const {
    // The status line went out with the headers: a late failure is told in the body.
    if (e.finish == FinishReason::Error || e.finish == FinishReason::Cancelled)
      return error_body(Api::OpenAI, event_error(e));
    json b = envelope(kind_ == Kind::Chat ? "chat.completion" : "text_completion");
    json choice = {{"index", 0}};
    if (kind_ == Kind::Chat)
      choice["message"] = {{"role", "assistant"}, {"content", text_}};
    else
      choice["text"] = text_;
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason(e);
    b["choices"] = json::array({choice});
    b["usage"] = usage_json(e);
    b["timings"] = timings_json(e);
    return dump_json(b);
  }

  Kind kind_;
  bool stream_, include_usage_;
  std::string model_, id_;
  int64_t created_;
  std::string text_;
};

void generate(Kind kind, const httplib::Request& req, httplib::Response& res, ServeContext& ctx) {
  auto body = parse_json_object(req.body);
  if (!body.ok()) return send_error(res, Api::OpenAI, bad_request(body.error().message));
  OpenAiRequest r;
  const std::optional<ApiError> e =
      kind == Kind::Chat ? read_chat_request(*body, ctx, r) : read_completion_request(*body, ctx, r);
  if (e) return send_error(res, Api::OpenAI, *e);
  EngineRequest er;
  er.prompt = std::move(r.prompt);
  er.params = std::move(r.gen);
  auto format = std::make_unique<OpenAiFormat>(kind, ctx, r.stream, r.include_usage);
  if (auto rejected = respond_with_generation(res, ctx.engine, std::move(er), std::move(format)))
    send_error(res, Api::OpenAI, rejection_error(*rejected));
}

json model_json(const ServeContext& ctx) {
  const ModelInfo& m = ctx.model;
  return {{"id", m.name},
          {"object", "model"},
          {"created", m.modified_unix},
          {"owned_by", "kt"},
          {"meta",
           {{"arch", m.arch},
            {"n_params", m.n_params},
            {"size", m.file_bytes},
            {"n_ctx", ctx.engine.n_ctx()},
            {"n_vocab", ctx.engine.n_vocab()},
            {"chat_template", ctx.chat_template.has_value()}}}};
}

}  // namespace

void install_openai_routes(httplib::Server& server, ServeContext& ctx) {
  server.Post("/v1/chat/completions", guarded(Api::OpenAI, [&ctx](const httplib::Request& req, httplib::Response& res) {
                generate(Kind::Chat, req, res, ctx);
              }));
  server.Post("/v1/completions", guarded(Api::OpenAI, [&ctx](const httplib::Request& req, httplib::Response& res) {
                generate(Kind::Completion, req, res, ctx);
              }));
  server.Get("/v1/models", guarded(Api::OpenAI, [&ctx](const httplib::Request&, httplib::Response& res) {
               res.set_content(dump_json(json{{"object", "list"}, {"data", json::array({model_json(ctx)})}}),
                               "application/json");
             }));
  server.Get("/v1/models/(.+)", guarded(Api::OpenAI, [&ctx](const httplib::Request& req, httplib::Response& res) {
               const std::string name = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
               if (!ctx.is_model(name)) return send_error(res, Api::OpenAI, model_not_found(name));
               res.set_content(dump_json(model_json(ctx)), "application/json");
             }));
}

}  // namespace kt::serve
