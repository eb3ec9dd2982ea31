// The OpenAI endpoints: request bodies (openai_request.cpp) to the engine,
// events back as OpenAI's chunks or bodies.
#include "tools/kt-serve/openai_api.h"

#include <cmath>
#include <utility>

#include "tools/kt-serve/chat_output.h"
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

// OpenAI's logprobs entry for one token: its text, bytes, log-probability
// and the most likely tokens at its step.
json token_logprob_json(const Tokenizer& tok, bool special, int32_t id, float logprob) {
  const std::string text = tok.decode_token(id, special);
  json bytes = json::array();
  for (char c : text) bytes.push_back(int(uint8_t(c)));
  // -inf is not JSON: a masked token's log-probability is the lowest float.
  return {{"token", text}, {"logprob", std::isfinite(logprob) ? logprob : -9999.0f}, {"bytes", bytes}};
}

json chat_logprobs_json(const Tokenizer& tok, bool special, const std::vector<TokenLogprobs>& lps) {
  json content = json::array();
  for (const TokenLogprobs& lp : lps) {
    json e = token_logprob_json(tok, special, lp.token, lp.logprob);
    json top = json::array();
    for (const auto& t : lp.top) top.push_back(token_logprob_json(tok, special, t.id, t.logprob));
    e["top_logprobs"] = std::move(top);
    content.push_back(std::move(e));
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

// Completions' logprobs: parallel lists, top_logprobs as {token: logprob}.
json completion_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprobs>& lps, size_t text_offset) {
  json tokens = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprobs& lp : lps) {
    const std::string t = tok.decode_token(lp.token);
    tokens.push_back(t);
    token_lps.push_back(std::isfinite(lp.logprob) ? lp.logprob : -9999.0f);
    json top = json::object();
    for (const auto& c : lp.top) top[tok.decode_token(c.id)] = std::isfinite(c.logprob) ? c.logprob : -9999.0f;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += t.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c;
    if (with_index) c["index"] = i;
    c["id"] = calls[i].id;
    c["type"] = "function";
    c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(c));
  }
  return out;
}

// Both endpoints' responses, as SSE chunks or one body.
class OpenAiFormat final : public ResponseFormat {
 public:
  OpenAiFormat(Kind kind, const ServeContext& ctx, const OpenAiRequest& r)
      : kind_(kind), stream_(r.stream), include_usage_(r.include_usage), logprobs_(r.gen.logprobs >= 0),
        special_(r.gen.render_special), tok_(ctx.tokenizer), model_(ctx.model.name),
        id_(random_id(kind == Kind::Chat ? "chatcmpl-" : "cmpl-")), created_(unix_now()),
        output_(r.split_reasoning, r.reasoning_open, r.parse_tools ? ctx.tool_format.get() : nullptr) {}

  const char* content_type() const override { return stream_ ? "text/event-stream" : "application/json"; }

  std::string start() override {
    if (!stream_ || kind_ != Kind::Chat) return "";
    return sse(chunk({{"role", "assistant"}, {"content", ""}}, json()));
  }

  std::string on_event(const EngineEvent& e) override {
    lps_.insert(lps_.end(), e.logprobs.begin(), e.logprobs.end());
    if (kind_ == Kind::Completion) return completion_event(e);
    ChatOutput::Delta d = output_.push(e.text);
    if (!stream_) {
      reasoning_ += d.reasoning;
      text_ += d.content;
      if (!e.done) return "";
      ChatOutput::Delta last = output_.finish(&calls_);
      reasoning_ += last.reasoning;
      text_ += last.content;
      return body(e);
    }
    std::string out = delta_chunk(d);
    if (!e.done) return out;
    if (e.finish == FinishReason::Error || e.finish == FinishReason::Cancelled)
      return out + "data: " + error_body(Api::OpenAI, event_error(e)) + "\n\n" + "data: [DONE]\n\n";
    out += delta_chunk(output_.finish(&calls_));
    if (!calls_.empty()) out += sse(chunk({{"tool_calls", tool_calls_json(calls_, true)}}, json()));
    json last = chunk(json::object(), reason(e));
    if (logprobs_ && !lps_.empty()) last["choices"][0]["logprobs"] = chat_logprobs_json(tok_, special_, std::exchange(lps_, {}));
    last["timings"] = timings_json(e);
    out += sse(last);
    if (include_usage_) out += usage_chunk(e);
    return out + "data: [DONE]\n\n";
  }

 private:
  static std::string sse(const json& j) { return "data: " + dump_json(j) + "\n\n"; }

  json reason(const EngineEvent& e) const { return calls_.empty() ? finish_reason(e) : json("tool_calls"); }

  std::string usage_chunk(const EngineEvent& e) const {
    json usage = chunk(json(), json());
    usage["choices"] = json::array();
    usage["usage"] = usage_json(e);
    return sse(usage);
  }

  // A chat chunk for what the output gave now (nothing when it held it back).
  std::string delta_chunk(const ChatOutput::Delta& d) {
    if (d.empty()) return "";
    json delta = json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.content.empty()) delta["content"] = d.content;
    json c = chunk(delta, json());
    if (logprobs_ && !lps_.empty()) c["choices"][0]["logprobs"] = chat_logprobs_json(tok_, special_, std::exchange(lps_, {}));
    return sse(c);
  }

  std::string completion_event(const EngineEvent& e) {
    if (!stream_) {
      text_ += e.text;
      return e.done ? body(e) : "";
    }
    std::string out;
    if (!e.text.empty()) {
      json c = chunk(json(e.text), json());
      if (logprobs_) c["choices"][0]["logprobs"] = completion_logprobs_json(tok_, std::exchange(lps_, {}), text_offset_);
      text_offset_ += e.text.size();
      out += sse(c);
    }
    if (!e.done) return out;
    if (e.finish == FinishReason::Error || e.finish == FinishReason::Cancelled) {
      out += "data: " + error_body(Api::OpenAI, event_error(e)) + "\n\n";
    } else {
      json last = chunk(json(""), finish_reason(e));
      if (logprobs_ && !lps_.empty())
        last["choices"][0]["logprobs"] = completion_logprobs_json(tok_, std::exchange(lps_, {}), text_offset_);
      last["timings"] = timings_json(e);
      out += sse(last);
      if (include_usage_) out += usage_chunk(e);
    }
    return out + "data: [DONE]\n\n";
  }

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
    if (kind_ == Kind::Chat) {
      json message = {{"role", "assistant"}, {"content", calls_.empty() || !text_.empty() ? json(text_) : json()}};
      if (!reasoning_.empty()) message["reasoning_content"] = reasoning_;
      if (!calls_.empty()) message["tool_calls"] = tool_calls_json(calls_, false);
      choice["message"] = std::move(message);
      choice["logprobs"] = logprobs_ ? chat_logprobs_json(tok_, special_, lps_) : json();
    } else {
      choice["text"] = text_;
      choice["logprobs"] = logprobs_ ? completion_logprobs_json(tok_, lps_, 0) : json();
    }
    choice["finish_reason"] = reason(e);
    b["choices"] = json::array({choice});
    b["usage"] = usage_json(e);
    b["timings"] = timings_json(e);
    return dump_json(b);
  }

  Kind kind_;
  bool stream_, include_usage_, logprobs_, special_;
  const Tokenizer& tok_;
  std::string model_, id_;
  int64_t created_;
  ChatOutput output_;
  std::string text_, reasoning_;
  std::vector<ToolCall> calls_;
  std::vector<TokenLogprobs> lps_;  // not yet sent (streaming) or all (not)
  size_t text_offset_ = 0;
};

void generate(Kind kind, const httplib::Request& req, httplib::Response& res, ServeContext& ctx) {
  auto body = parse_json_object(req.body);
  if (!body.ok()) return send_error(res, Api::OpenAI, bad_request(body.error().message));
  auto ordered = parse_ordered_json_object(req.body);
  if (!ordered.ok()) return send_error(res, Api::OpenAI, bad_request(ordered.error().message));
  OpenAiRequest r;
  const std::optional<ApiError> e =
      kind == Kind::Chat ? read_chat_request(*body, *ordered, ctx, r) : read_completion_request(*body, *ordered, ctx, r);
  if (e) return send_error(res, Api::OpenAI, *e);
  auto format = std::make_unique<OpenAiFormat>(kind, ctx, r);
  EngineRequest er;
  er.prompt = std::move(r.prompt);
  er.params = std::move(r.gen);
  if (auto rejected = respond_with_generation(res, *ctx.engine, std::move(er), std::move(format)))
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
            {"n_ctx", ctx.engine->n_ctx()},
            {"n_vocab", ctx.engine->n_vocab()},
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
