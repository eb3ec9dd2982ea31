// POST /v1/messages (anthropic_api.h): Anthropic's request to a chat, the
// engine's events back as Anthropic's content blocks.
#include "tools/kt-serve/anthropic_api.h"

#include <algorithm>

#include "tools/kt-serve/anthropic_request.h"
#include "tools/kt-serve/chat_output.h"
#include "tools/kt-serve/generation_response.h"
#include "tools/kt-serve/handler_guard.h"
#include "tools/kt-serve/json_text.h"
#include "tools/kt-serve/response_stamps.h"

namespace kt::serve {

namespace {

using json = nlohmann::ordered_json;

class AnthropicFormat final : public ResponseFormat {
 public:
  AnthropicFormat(const ServeContext& ctx, const MessagesRequest& r)
      : stream_(r.stream), model_(ctx.model.name), id_(random_id("msg_")), stops_(r.stops),
        prompt_tokens_(int64_t(r.prompt.size())),
        output_(r.split_reasoning, r.reasoning_open, r.parse_tools ? ctx.tool_format.get() : nullptr) {}

  const char* content_type() const override { return stream_ ? "text/event-stream" : "application/json"; }

  std::string start() override {
    if (!stream_) return "";
    json msg = {{"id", id_},          {"type", "message"},     {"role", "assistant"}, {"model", model_},
                {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                {"usage", {{"input_tokens", prompt_tokens_}, {"output_tokens", 0}}}};
    return event("message_start", {{"type", "message_start"}, {"message", msg}});
  }

  std::string on_event(const EngineEvent& e) override {
    ChatOutput::Delta d = output_.step(e.text, e.done, &calls_);
    if (!stream_) {
      thinking_ += d.reasoning;
      text_ += d.content;
      return e.done ? body(e) : "";
    }
    std::string out;
    if (!d.reasoning.empty()) out += delta("thinking", {{"type", "thinking_delta"}, {"thinking", d.reasoning}});
    if (!d.content.empty()) out += delta("text", {{"type", "text_delta"}, {"text", d.content}});
    if (!e.done) return out;
    if (e.finish == FinishReason::Error || e.finish == FinishReason::Cancelled)
      return out + event("error", json::parse(error_body(Api::Anthropic, server_error(e.error.empty() ? "cancelled" : e.error))));
    out += close_block();
    for (const ToolCall& c : calls_) {
      json args = json::parse(c.arguments, nullptr, false);
      out += event("content_block_start", {{"type", "content_block_start"},
                                           {"index", index_},
                                           {"content_block", {{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", json::object()}}}});
      out += event("content_block_delta", {{"type", "content_block_delta"},
                                           {"index", index_},
                                           {"delta", {{"type", "input_json_delta"}, {"partial_json", args.is_discarded() ? "{}" : c.arguments}}}});
      out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
      ++index_;
    }
    out += event("message_delta", {{"type", "message_delta"},
                                   {"delta", {{"stop_reason", stop_reason(e)}, {"stop_sequence", stop_sequence(e)}}},
                                   {"usage", usage(e)}});
    out += event("message_stop", {{"type", "message_stop"}});
    return out;
  }

 private:
  static std::string event(const char* name, const json& data) {
    return std::string("event: ") + name + "\ndata: " + dump_json(data) + "\n\n";
  }

  // A delta for a block of kind ("text" or "thinking"), opening it first.
  std::string delta(const char* kind, const json& d) {
    std::string out;
    if (open_ != kind) {
      out += close_block();
      json block = std::string(kind) == "text" ? json{{"type", "text"}, {"text", ""}}
                                                : json{{"type", "thinking"}, {"thinking", ""}};
      out += event("content_block_start", {{"type", "content_block_start"}, {"index", index_}, {"content_block", block}});
      open_ = kind;
    }
    return out + event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
  }

  std::string close_block() {
    if (open_.empty()) return "";
    std::string out;
    if (open_ == "thinking")  // thinking blocks end with a signature; kt signs nothing
      out += event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_},
                                           {"delta", {{"type", "signature_delta"}, {"signature", ""}}}});
    out += event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    open_.clear();
    ++index_;
    return out;
  }

  json stop_reason(const EngineEvent& e) const {
    if (!calls_.empty()) return "tool_use";
    if (e.finish == FinishReason::Length) return "max_tokens";
    if (e.stop_index >= 0) return "stop_sequence";
    return "end_turn";
  }
  json stop_sequence(const EngineEvent& e) const {
    return e.stop_index >= 0 && size_t(e.stop_index) < stops_.size() && calls_.empty() ? json(stops_[size_t(e.stop_index)]) : json();
  }
  static json usage(const EngineEvent& e) {
    return {{"input_tokens", e.prompt_tokens - e.cached_tokens},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", e.cached_tokens},
            {"output_tokens", e.completion_tokens}};
  }

  std::string body(const EngineEvent& e) const {
    if (e.finish == FinishReason::Error || e.finish == FinishReason::Cancelled)
      return error_body(Api::Anthropic, server_error(e.error.empty() ? "the request was cancelled" : e.error));
    json content = json::array();
    if (!thinking_.empty()) content.push_back({{"type", "thinking"}, {"thinking", thinking_}, {"signature", ""}});
    if (!text_.empty() || calls_.empty()) content.push_back({{"type", "text"}, {"text", text_}});
    for (const ToolCall& c : calls_) {
      json args = json::parse(c.arguments, nullptr, false);
      content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", args.is_discarded() ? json::object() : args}});
    }
    json b = {{"id", id_},           {"type", "message"},        {"role", "assistant"},
              {"model", model_},     {"content", content},       {"stop_reason", stop_reason(e)},
              {"stop_sequence", stop_sequence(e)}, {"usage", usage(e)}};
    return dump_json(b);
  }

  bool stream_;
  std::string model_, id_;
  std::vector<std::string> stops_;
  int64_t prompt_tokens_;
  ChatOutput output_;
  std::string text_, thinking_;
  std::vector<ToolCall> calls_;
  std::string open_;  // the open block's kind ("" when none)
  int index_ = 0;
};

void messages(const httplib::Request& req, httplib::Response& res, ServeContext& ctx) {
  auto body = parse_json_object(req.body);
  if (!body.ok()) return send_error(res, Api::Anthropic, bad_request(body.error().message));
  auto ordered = parse_ordered_json_object(req.body);
  if (!ordered.ok()) return send_error(res, Api::Anthropic, bad_request(ordered.error().message));
  MessagesRequest r;
  if (auto e = read_messages(*body, *ordered, ctx, r)) return send_error(res, Api::Anthropic, *e);
  auto format = std::make_unique<AnthropicFormat>(ctx, r);
  EngineRequest er;
  er.prompt = std::move(r.prompt);
  er.params = std::move(r.gen);
  if (auto rejected = respond_with_generation(res, *ctx.engine, std::move(er), std::move(format)))
    send_error(res, Api::Anthropic, rejection_error(*rejected));
}

}  // namespace

void install_anthropic_routes(httplib::Server& server, ServeContext& ctx) {
  server.Post("/v1/messages", guarded(Api::Anthropic, [&ctx](const httplib::Request& req, httplib::Response& res) {
                messages(req, res, ctx);
              }));
}

}  // namespace kt::serve
