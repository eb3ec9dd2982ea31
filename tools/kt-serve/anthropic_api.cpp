// POST /v1/messages (anthropic_api.h): Anthropic's request to a chat, the
// engine's events back as Anthropic's content blocks.
#include "tools/kt-serve/anthropic_api.h"

#include <algorithm>

#include "tools/kt-serve/chat_output.h"
#include "tools/kt-serve/chat_prompt.h"
#include "tools/kt-serve/field_reader.h"
#include "tools/kt-serve/generation_response.h"
#include "tools/kt-serve/handler_guard.h"
#include "tools/kt-serve/json_text.h"
#include "tools/kt-serve/response_stamps.h"

namespace kt::serve {

namespace {

using json = nlohmann::ordered_json;
constexpr size_t kMaxMessages = 4096;

struct MessagesRequest {
  GenerationParams gen;
  bool stream = false;
  std::vector<int32_t> prompt;
  bool split_reasoning = false, reasoning_open = false, parse_tools = false;
  std::vector<std::string> stops;
};

// A block list's text (or a plain string); other block types are refused.
std::optional<std::string> text_of(const json& content, const std::string& where, std::optional<ApiError>& error) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    error = bad_request(where + ": must be a string or a list of content blocks", where);
    return std::nullopt;
  }
  std::string text;
  for (const json& b : content) {
    if (!b.is_object() || b.value("type", "") != "text" || !b.contains("text") || !b["text"].is_string()) {
      error = bad_request(where + ": only text blocks are supported here", where);
      return std::nullopt;
    }
    if (!text.empty()) text += "\n";
    text += b["text"].get<std::string>();
  }
  return text;
}

std::optional<ApiError> read_messages(const nlohmann::json& body, const json& ordered, const ServeContext& ctx,
                                      MessagesRequest& out) {
  FieldReader f(body);
  const auto model = f.string("model", 512);
  if (f.failed()) return f.error();
  if (!model) return bad_request("model: Field required", "model");
  if (!model->empty() && !ctx.is_model(*model))
    return with_status(404, "model: " + printable(*model) + " (GET /v1/models lists the one served)", "not_found");
  const auto max_tokens = f.integer("max_tokens", 1, int64_t(1) << 30);
  if (f.failed()) return f.error();
  if (!max_tokens) return bad_request("max_tokens: Field required", "max_tokens");
  out.gen.max_tokens = *max_tokens;
  out.stream = f.boolean("stream").value_or(false);
  SamplerParams& sp = out.gen.sampling;
  sp.temperature = float(f.number("temperature", 0, 1).value_or(1.0));
  sp.top_p = float(f.number("top_p", 0, 1).value_or(1.0));
  sp.top_k = int32_t(f.integer("top_k", 0, 1 << 30).value_or(0));
  sp.min_p = 0;
  sp.repeat_penalty = 1;
  if (auto stops = f.strings("stop_sequences", 16, 256)) out.gen.stop = *stops;
  f.object("metadata");
  if (f.failed()) return f.error();
  out.stops = out.gen.stop;

  ChatInput in;
  if (auto sys = ordered.find("system"); sys != ordered.end() && !sys->is_null()) {
    std::optional<ApiError> e;
    auto text = text_of(*sys, "system", e);
    if (!text) return e;
    in.messages.push_back({{"role", "system"}, {"content", *text}});
  }
  const auto msgs = ordered.find("messages");
  if (msgs == ordered.end() || !msgs->is_array() || msgs->empty())
    return bad_request("messages: must be a non-empty list of {role, content}", "messages");
  if (msgs->size() > kMaxMessages) return bad_request("messages: too many", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string where = "messages." + std::to_string(i);
    if (!m.is_object() || !m.contains("role") || (m["role"] != "user" && m["role"] != "assistant"))
      return bad_request(where + ".role: must be user or assistant", where);
    const std::string role = m["role"].get<std::string>();
    const json content = m.value("content", json());
    if (content.is_string()) {
      in.messages.push_back({{"role", role}, {"content", content}});
      continue;
    }
    if (!content.is_array()) return bad_request(where + ".content: must be a string or a list of blocks", where);
    std::string text, thinking;
    json calls = json::array();
    for (size_t k = 0; k < content.size(); ++k) {
      const json& b = content[k];
      const std::string bw = where + ".content." + std::to_string(k);
      const std::string type = b.is_object() ? b.value("type", "") : "";
      if (type == "text" && b.contains("text") && b["text"].is_string()) {
        if (!text.empty()) text += "\n";
        text += b["text"].get<std::string>();
      } else if (type == "thinking" && role == "assistant") {
        if (b.contains("thinking") && b["thinking"].is_string()) thinking += b["thinking"].get<std::string>();
      } else if (type == "redacted_thinking" && role == "assistant") {
      } else if (type == "tool_use" && role == "assistant") {
        if (!b.contains("name") || !b["name"].is_string() || !b.contains("id") || !b["id"].is_string())
          return bad_request(bw + ": a tool_use block needs id and name", bw);
        const json input = b.value("input", json::object());
        if (!input.is_object()) return bad_request(bw + ".input: must be an object", bw);
        calls.push_back({{"id", b["id"]},
                         {"type", "function"},
                         {"function", {{"name", b["name"]}, {"arguments", dump_json(input)}}}});
      } else if (type == "tool_result" && role == "user") {
        if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
          return bad_request(bw + ".tool_use_id: Field required", bw);
        std::string result;
        if (b.contains("content") && !b["content"].is_null()) {
          std::optional<ApiError> e;
          auto t = text_of(b["content"], bw + ".content", e);
          if (!t) return e;
          result = *t;
        }
        if (b.value("is_error", false)) result = "Error: " + result;
        in.messages.push_back({{"role", "tool"}, {"tool_call_id", b["tool_use_id"]}, {"content", result}});
      } else {
        return bad_request(bw + ": content blocks of type '" + printable(type, 40) + "' are not supported here", bw);
      }
    }
    if (role == "assistant") {
      json msg = {{"role", "assistant"}, {"content", calls.empty() || !text.empty() ? json(text) : json()}};
      if (!calls.empty()) msg["tool_calls"] = std::move(calls);
      if (!thinking.empty()) msg["reasoning_content"] = thinking;
      in.messages.push_back(std::move(msg));
    } else if (!text.empty() || in.messages.empty() || in.messages.back().value("role", "") != "tool") {
      in.messages.push_back({{"role", "user"}, {"content", text}});
    }
  }

  // Tools: {name, description, input_schema}; server tools (bash, web search, ...) are not ours.
  if (auto t = ordered.find("tools"); t != ordered.end() && !t->is_null()) {
    if (!t->is_array()) return bad_request("tools: must be a list", "tools");
    json openai_tools = json::array();
    for (size_t i = 0; i < t->size(); ++i) {
      const json& tool = (*t)[i];
      if (!tool.is_object()) return bad_request("tools." + std::to_string(i) + ": must be an object", "tools");
      if (auto type = tool.value("type", "custom"); type != "custom")
        return bad_request("tools." + std::to_string(i) + ": server tools ('" + printable(type, 40) + "') are not supported", "tools");
      json fn = {{"name", tool.value("name", json())}};
      if (tool.contains("description")) fn["description"] = tool["description"];
      fn["parameters"] = tool.value("input_schema", json());
      openai_tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    auto specs = parse_tool_specs(openai_tools);
    if (!specs.ok()) return bad_request(specs.error().message, "tools");
    in.specs = std::move(*specs);
    in.tools = std::move(openai_tools);
  }
  if (auto tc = ordered.find("tool_choice"); tc != ordered.end() && !tc->is_null()) {
    const std::string type = tc->is_object() ? tc->value("type", "") : "";
    if (type == "auto") in.tool_choice = ToolChoice::Auto;
    else if (type == "any") in.tool_choice = ToolChoice::Required;
    else if (type == "none") in.tool_choice = ToolChoice::None;
    else if (type == "tool" && tc->contains("name") && (*tc)["name"].is_string()) {
      in.tool_choice = ToolChoice::Named;
      in.named_tool = (*tc)["name"].get<std::string>();
      if (std::none_of(in.specs.begin(), in.specs.end(), [&](const ToolSpec& s) { return s.name == in.named_tool; }))
        return bad_request("tool_choice.name: '" + printable(in.named_tool, 64) + "' is not among the tools", "tool_choice");
    } else {
      return bad_request("tool_choice: must be {type: auto | any | none | tool, name}", "tool_choice");
    }
    if (in.tool_choice == ToolChoice::Required && in.specs.empty())
      return bad_request("tool_choice: 'any' needs tools", "tool_choice");
    if (tc->is_object() && tc->value("disable_parallel_tool_use", false)) in.parallel_tool_calls = false;
  }
  out.split_reasoning = ctx.options.reasoning_split;
  if (auto th = ordered.find("thinking"); th != ordered.end() && th->is_object()) {
    const std::string type = th->value("type", "");
    if (type != "enabled" && type != "disabled") return bad_request("thinking.type: must be enabled or disabled", "thinking");
    in.kwargs["enable_thinking"] = type == "enabled";
  }
  ChatPrompt p = chat_prompt(ctx, in);
  if (p.error) return p.error;
  out.gen.grammar = std::move(p.grammar);
  out.gen.render_special = p.render_special;
  out.prompt = std::move(p.tokens);
  out.reasoning_open = p.reasoning_open;
  out.parse_tools = p.parse_tools;
  return std::nullopt;
}

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
    ChatOutput::Delta d = output_.push(e.text);
    if (e.done) {
      ChatOutput::Delta rest = output_.finish(&calls_);
      d.reasoning += rest.reasoning;
      d.content += rest.content;
    }
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
  if (auto rejected = respond_with_generation(res, ctx.engine, std::move(er), std::move(format)))
    send_error(res, Api::Anthropic, rejection_error(*rejected));
}

}  // namespace

void install_anthropic_routes(httplib::Server& server, ServeContext& ctx) {
  server.Post("/v1/messages", guarded(Api::Anthropic, [&ctx](const httplib::Request& req, httplib::Response& res) {
                messages(req, res, ctx);
              }));
}

}  // namespace kt::serve
