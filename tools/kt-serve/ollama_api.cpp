// The Ollama endpoints: request bodies (ollama_request.cpp) to the engine,
// events back as Ollama's NDJSON lines or body, and the model listings.
#include "tools/kt-serve/ollama_api.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "tools/kt-serve/chat_output.h"
#include "tools/kt-serve/generation_response.h"
#include "tools/kt-serve/handler_guard.h"
#include "tools/kt-serve/json_text.h"
#include "tools/kt-serve/ollama_request.h"
#include "tools/kt-serve/response_stamps.h"

namespace kt::serve {

namespace {

using json = nlohmann::ordered_json;  // responses keep their fields in the order written

enum class Kind { Chat, Generate };

// The version of Ollama's API that kt-serve speaks (clients compare it).
constexpr const char* kOllamaApiVersion = "0.6.4";

int64_t ns(double seconds) { return int64_t(seconds * 1e9); }

json logprobs_json(const Tokenizer& tok, bool special, const std::vector<TokenLogprobs>& lps) {
  auto one = [&](int32_t id, float lp) {
    const std::string text = tok.decode_token(id, special);
    json bytes = json::array();
    for (char c : text) bytes.push_back(int(uint8_t(c)));
    return json{{"token", text}, {"logprob", std::isfinite(lp) ? lp : -9999.0f}, {"bytes", bytes}};
  };
  json out = json::array();
  for (const TokenLogprobs& lp : lps) {
    json e = one(lp.token, lp.logprob);
    json top = json::array();
    for (const auto& t : lp.top) top.push_back(one(t.id, t.logprob));
    e["top_logprobs"] = std::move(top);
    out.push_back(std::move(e));
  }
  return out;
}

class OllamaFormat final : public ResponseFormat {
 public:
  OllamaFormat(Kind kind, const ServeContext& ctx, const OllamaRequest& r)
      : kind_(kind), stream_(r.stream), logprobs_(r.gen.logprobs >= 0), special_(r.gen.render_special),
        tok_(ctx.tokenizer), model_(ctx.model.name), prompt_(r.prompt),
        output_(r.split_reasoning, r.reasoning_open, r.parse_tools ? ctx.tool_format.get() : nullptr) {}

  const char* content_type() const override { return stream_ ? "application/x-ndjson" : "application/json"; }

  std::string on_event(const EngineEvent& e) override {
    lps_.insert(lps_.end(), e.logprobs.begin(), e.logprobs.end());
    ChatOutput::Delta d = output_.step(e.text, e.done, &calls_);
    if (!stream_) {
      text_ += d.content;
      thinking_ += d.reasoning;
      return e.done ? dump_json(last(e, text_, thinking_)) : "";
    }
    if (e.done) return dump_json(last(e, d.content, d.reasoning)) + "\n";
    if (d.empty()) return "";
    json line = head();
    if (kind_ == Kind::Chat) {
      line["message"] = {{"role", "assistant"}, {"content", d.content}};
      if (!d.reasoning.empty()) line["message"]["thinking"] = d.reasoning;
    } else {
      line["response"] = d.content;
      if (!d.reasoning.empty()) line["thinking"] = d.reasoning;
    }
    if (logprobs_) line["logprobs"] = logprobs_json(tok_, special_, std::exchange(lps_, {}));
    line["done"] = false;
    return dump_json(line) + "\n";
  }

 private:
  json head() const { return {{"model", model_}, {"created_at", rfc3339_now()}}; }

  // The final object: done, the reason, the counts and durations (ns).
  json last(const EngineEvent& e, const std::string& text, const std::string& thinking) {
    if (e.finish == FinishReason::Error || e.finish == FinishReason::Cancelled)
      return {{"error", e.error.empty() ? std::string("the request was cancelled") : e.error}};
    json j = head();
    if (kind_ == Kind::Chat) {
      j["message"] = {{"role", "assistant"}, {"content", text}};
      if (!thinking.empty()) j["message"]["thinking"] = thinking;
      if (!calls_.empty()) {
        json calls = json::array();
        for (const ToolCall& c : calls_) {
          json args = json::parse(c.arguments, nullptr, false);
          calls.push_back({{"function", {{"name", c.name}, {"arguments", args.is_discarded() ? json::object() : args}}}});
        }
        j["message"]["tool_calls"] = std::move(calls);
      }
    } else {
      j["response"] = text;
      if (!thinking.empty()) j["thinking"] = thinking;
    }
    if (logprobs_) j["logprobs"] = logprobs_json(tok_, special_, std::exchange(lps_, {}));
    j["done"] = true;
    j["done_reason"] = finish_reason_name(e.finish);
    if (kind_ == Kind::Generate) {
      // The conversation so far, for the next request's "context".
      std::vector<int32_t> context = prompt_;
      context.insert(context.end(), e.output_tokens.begin(), e.output_tokens.end());
      if (e.finish == FinishReason::Stop && !e.output_tokens.empty() && context.size() > prompt_.size())
        context.pop_back();  // the end-of-generation token, when it ended the text
      j["context"] = context;
    }
    j["total_duration"] = ns(e.queue_s + e.prefill_s + e.decode_s);
    j["load_duration"] = 0;
    j["prompt_eval_count"] = e.prompt_tokens - e.cached_tokens;
    j["prompt_eval_duration"] = ns(e.prefill_s);
    j["eval_count"] = e.completion_tokens;
    j["eval_duration"] = ns(e.decode_s);
    return j;
  }

  Kind kind_;
  bool stream_, logprobs_, special_;
  const Tokenizer& tok_;
  std::string model_;
  std::vector<int32_t> prompt_;
  ChatOutput output_;
  std::string text_, thinking_;
  std::vector<ToolCall> calls_;
  std::vector<TokenLogprobs> lps_;
};

void generate(Kind kind, const httplib::Request& req, httplib::Response& res, ServeContext& ctx) {
  auto body = parse_json_object(req.body);
  if (!body.ok()) return send_error(res, Api::Ollama, bad_request(body.error().message));
  auto ordered = parse_ordered_json_object(req.body);
  if (!ordered.ok()) return send_error(res, Api::Ollama, bad_request(ordered.error().message));
  OllamaRequest r;
  const std::optional<ApiError> e =
      kind == Kind::Chat ? read_ollama_chat(*body, *ordered, ctx, r) : read_ollama_generate(*body, *ordered, ctx, r);
  if (e) return send_error(res, Api::Ollama, *e);
  if (r.empty) {
    // Ollama loads the model and says so: nothing to generate.
    json j = {{"model", ctx.model.name}, {"created_at", rfc3339_now()}};
    if (kind == Kind::Chat)
      j["message"] = {{"role", "assistant"}, {"content", ""}};
    else
      j["response"] = "";
    j["done"] = true;
    j["done_reason"] = "load";
    res.set_content(dump_json(j) + (r.stream ? "\n" : ""), r.stream ? "application/x-ndjson" : "application/json");
    return;
  }
  auto format = std::make_unique<OllamaFormat>(kind, ctx, r);
  EngineRequest er;
  er.prompt = r.prompt;
  er.params = std::move(r.gen);
  if (auto rejected = respond_with_generation(res, *ctx.engine, std::move(er), std::move(format)))
    send_error(res, Api::Ollama, rejection_error(*rejected));
}

std::string parameter_size(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull)
    std::snprintf(buf, sizeof buf, "%.1fB", double(n) / 1e9);
  else if (n >= 1000000ull)
    std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1fK", double(n) / 1e3);
  return buf;
}

json details(const ModelInfo& m) {
  return {{"parent_model", ""},
          {"format", "gguf"},
          {"family", m.arch},
          {"families", json::array({m.arch})},
          {"parameter_size", parameter_size(m.n_params)},
          {"quantization_level", m.quantization}};
}

json tag(const ModelInfo& m) {
  return {{"name", m.name},
          {"model", m.name},
          {"modified_at", rfc3339(m.modified_unix)},
          {"size", m.file_bytes},
          {"digest", m.digest},
          {"details", details(m)}};
}

void show(const httplib::Request& req, httplib::Response& res, const ServeContext& ctx) {
  auto body = parse_json_object(req.body);
  if (!body.ok()) return send_error(res, Api::Ollama, bad_request(body.error().message));
  std::string name;
  for (const char* key : {"model", "name"})
    if (auto it = body->find(key); it != body->end() && it->is_string()) name = it->get<std::string>();
  if (name.empty()) return send_error(res, Api::Ollama, bad_request("model is required", "model"));
  if (!ctx.is_model(name)) return send_error(res, Api::Ollama, with_status(404, "model '" + printable(name) + "' not found", "model_not_found"));
  const ModelInfo& m = ctx.model;
  json info = {{"general.architecture", m.arch},
               {"general.parameter_count", m.n_params},
               {m.arch + ".context_length", ctx.engine->n_ctx()},
               {m.arch + ".vocab_size", ctx.engine->n_vocab()}};
  json capabilities = json::array({"completion"});
  if (ctx.chat_template) capabilities.push_back("tools");
  if (ctx.chat_template_source.find("<think>") != std::string::npos) capabilities.push_back("thinking");
  json j = {{"modelfile", ""},
            {"parameters", ""},
            {"template", ctx.chat_template_source},
            {"details", details(m)},
            {"model_info", info},
            {"capabilities", capabilities},
            {"modified_at", rfc3339(m.modified_unix)}};
  res.set_content(dump_json(j), "application/json");
}

}  // namespace

void install_ollama_routes(httplib::Server& server, ServeContext& ctx) {
  server.Post("/api/chat", guarded(Api::Ollama, [&ctx](const httplib::Request& req, httplib::Response& res) {
                generate(Kind::Chat, req, res, ctx);
              }));
  server.Post("/api/generate", guarded(Api::Ollama, [&ctx](const httplib::Request& req, httplib::Response& res) {
                generate(Kind::Generate, req, res, ctx);
              }));
  server.Get("/api/tags", guarded(Api::Ollama, [&ctx](const httplib::Request&, httplib::Response& res) {
               res.set_content(dump_json(json{{"models", json::array({tag(ctx.model)})}}), "application/json");
             }));
  server.Get("/api/ps", guarded(Api::Ollama, [&ctx](const httplib::Request&, httplib::Response& res) {
               json m = tag(ctx.model);
               m["size_vram"] = 0;
               m["expires_at"] = "0001-01-01T00:00:00Z";  // never unloaded
               res.set_content(dump_json(json{{"models", json::array({m})}}), "application/json");
             }));
  server.Post("/api/show", guarded(Api::Ollama, [&ctx](const httplib::Request& req, httplib::Response& res) {
                show(req, res, ctx);
              }));
  server.Get("/api/version", guarded(Api::Ollama, [](const httplib::Request&, httplib::Response& res) {
               res.set_content(dump_json(json{{"version", kOllamaApiVersion}}), "application/json");
             }));
}

}  // namespace kt::serve
