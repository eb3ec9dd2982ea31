// Anthropic's Messages request to a chat (anthropic_request.h). Every field
// is looked at with its type checked first: a block whose "type" is a number
// is the client's error (400), not a json exception (500).
#include "tools/kt-serve/anthropic_request.h"

#include <algorithm>

#include "tools/kt-serve/chat_prompt.h"
#include "tools/kt-serve/field_reader.h"
#include "tools/kt-serve/json_text.h"

namespace kt::serve {

namespace {

using json = nlohmann::ordered_json;
constexpr size_t kMaxMessages = 4096;

// o[key] when o is an object holding a string there, else null.
const std::string* string_at(const json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

bool true_at(const json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_boolean() && it->get<bool>();
}

void append_line(std::string& text, const std::string& more) {
  if (!text.empty()) text += "\n";
  text += more;
}

// A block list's text (or a plain string); other block types are refused.
std::optional<std::string> text_of(const json& content, const std::string& where, std::optional<ApiError>& error) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    error = bad_request(where + ": must be a string or a list of content blocks", where);
    return std::nullopt;
  }
  std::string text;
  for (const json& b : content) {
    const std::string* type = string_at(b, "type");
    const std::string* t = string_at(b, "text");
    if (!type || *type != "text" || !t) {
      error = bad_request(where + ": only text blocks are supported here", where);
      return std::nullopt;
    }
    append_line(text, *t);
  }
  return text;
}

// One message's blocks onto the chat: text and thinking join, tool_use
// blocks become the assistant's tool_calls, tool_result blocks tool messages.
std::optional<ApiError> read_blocks(const json& content, const std::string& role, const std::string& where,
                                    ChatInput& in) {
  std::string text, thinking;
  json calls = json::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const json& b = content[k];
    const std::string bw = where + ".content." + std::to_string(k);
    const std::string* tp = string_at(b, "type");
    const std::string type = tp ? *tp : "";
    if (type == "text" && string_at(b, "text")) {
      append_line(text, *string_at(b, "text"));
    } else if (type == "thinking" && role == "assistant") {
      if (const std::string* t = string_at(b, "thinking")) thinking += *t;
    } else if (type == "redacted_thinking" && role == "assistant") {
      // Opaque to us: the model cannot read it back.
    } else if (type == "tool_use" && role == "assistant") {
      const std::string* name = string_at(b, "name");
      const std::string* id = string_at(b, "id");
      if (!name || !id) return bad_request(bw + ": a tool_use block needs id and name", bw);
      const auto input = b.find("input");
      if (input != b.end() && !input->is_object()) return bad_request(bw + ".input: must be an object", bw);
      const std::string args = input == b.end() ? "{}" : dump_json(*input);
      calls.push_back({{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", args}}}});
    } else if (type == "tool_result" && role == "user") {
      const std::string* id = string_at(b, "tool_use_id");
      if (!id) return bad_request(bw + ".tool_use_id: Field required", bw);
      std::string result;
      if (const auto c = b.find("content"); c != b.end() && !c->is_null()) {
        std::optional<ApiError> e;
        auto t = text_of(*c, bw + ".content", e);
        if (!t) return e;
        result = std::move(*t);
      }
      if (true_at(b, "is_error")) result = "Error: " + result;
      in.messages.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", result}});
    } else {
      return bad_request(bw + ": content blocks of type '" + printable(type, 40) + "' are not supported here", bw);
    }
  }
  if (role == "assistant") {
    json msg = {{"role", "assistant"}, {"content", calls.empty() || !text.empty() ? json(text) : json()}};
    if (!calls.empty()) msg["tool_calls"] = std::move(calls);
    if (!thinking.empty()) msg["reasoning_content"] = thinking;
    in.messages.push_back(std::move(msg));
    return std::nullopt;
  }
  // A user turn of tool results alone adds no empty user message after them.
  const bool after_tool = !in.messages.empty() && in.messages.back().is_object() &&
                          string_at(in.messages.back(), "role") && *string_at(in.messages.back(), "role") == "tool";
  if (!text.empty() || !after_tool) in.messages.push_back({{"role", "user"}, {"content", text}});
  return std::nullopt;
}

// Tools: {name, description, input_schema}, as OpenAI's function tools;
// server tools (bash, web search, ...) are not ours.
std::optional<ApiError> read_anthropic_tools(const json& t, ChatInput& in) {
  if (!t.is_array()) return bad_request("tools: must be a list", "tools");
  json openai_tools = json::array();
  for (size_t i = 0; i < t.size(); ++i) {
    const json& tool = t[i];
    const std::string where = "tools." + std::to_string(i);
    if (!tool.is_object()) return bad_request(where + ": must be an object", "tools");
    if (const auto type = tool.find("type"); type != tool.end() && !(type->is_string() && *type == "custom"))
      return bad_request(where + ": server tools ('" + printable(dump_json(*type), 40) + "') are not supported", "tools");
    json fn = {{"name", tool.contains("name") ? tool["name"] : json()}};
    if (tool.contains("description")) fn["description"] = tool["description"];
    fn["parameters"] = tool.contains("input_schema") ? tool["input_schema"] : json();
    openai_tools.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  auto specs = parse_tool_specs(openai_tools);
  if (!specs.ok()) return bad_request(specs.error().message, "tools");
  in.specs = std::move(*specs);
  in.tools = std::move(openai_tools);
  return std::nullopt;
}

std::optional<ApiError> read_tool_choice(const json& tc, ChatInput& in) {
  const std::string* tp = string_at(tc, "type");
  const std::string type = tp ? *tp : "";
  const std::string* name = string_at(tc, "name");
  if (type == "auto") {
    in.tool_choice = ToolChoice::Auto;
  } else if (type == "any") {
    in.tool_choice = ToolChoice::Required;
  } else if (type == "none") {
    in.tool_choice = ToolChoice::None;
  } else if (type == "tool" && name) {
    in.tool_choice = ToolChoice::Named;
    in.named_tool = *name;
    if (std::none_of(in.specs.begin(), in.specs.end(), [&](const ToolSpec& s) { return s.name == in.named_tool; }))
      return bad_request("tool_choice.name: '" + printable(in.named_tool, 64) + "' is not among the tools", "tool_choice");
  } else {
    return bad_request("tool_choice: must be {type: auto | any | none | tool, name}", "tool_choice");
  }
  if (in.tool_choice == ToolChoice::Required && in.specs.empty())
    return bad_request("tool_choice: 'any' needs tools", "tool_choice");
  if (true_at(tc, "disable_parallel_tool_use")) in.parallel_tool_calls = false;
  return std::nullopt;
}

}  // namespace

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
    const std::string* role = string_at(m, "role");
    if (!role || (*role != "user" && *role != "assistant"))
      return bad_request(where + ".role: must be user or assistant", where);
    const auto content = m.find("content");
    if (content != m.end() && content->is_string()) {
      in.messages.push_back({{"role", *role}, {"content", *content}});
      continue;
    }
    if (content == m.end() || !content->is_array())
      return bad_request(where + ".content: must be a string or a list of blocks", where);
    if (auto e = read_blocks(*content, *role, where, in)) return e;
  }
  if (auto t = ordered.find("tools"); t != ordered.end() && !t->is_null())
    if (auto e = read_anthropic_tools(*t, in)) return e;
  if (auto tc = ordered.find("tool_choice"); tc != ordered.end() && !tc->is_null())
    if (auto e = read_tool_choice(*tc, in)) return e;
  out.split_reasoning = ctx.options.reasoning_split;
  if (auto th = ordered.find("thinking"); th != ordered.end() && !th->is_null()) {
    const std::string* type = string_at(*th, "type");
    if (!type || (*type != "enabled" && *type != "disabled"))
      return bad_request("thinking.type: must be enabled or disabled", "thinking");
    in.kwargs["enable_thinking"] = *type == "enabled";
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

}  // namespace kt::serve
