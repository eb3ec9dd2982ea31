#include "tools/kt-serve/ollama_request.h"

#include <algorithm>

#include "runtime/prompt.h"
#include "tools/kt-serve/chat_prompt.h"
#include "tools/kt-serve/field_reader.h"
#include "tools/kt-serve/output_constraint.h"

namespace kt::serve {

namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr size_t kMaxMessages = 4096;


// model, stream, options and the refused features, for both endpoints.
std::optional<ApiError> read_common(const json& body, const ojson& ordered, const ServeContext& ctx,
                                    OllamaRequest& out) {
  FieldReader f(body);
  auto model = f.string("model", 512);
  if (f.failed()) return f.error();
  if (!model || model->empty()) return bad_request("model is required", "model");
  if (!ctx.is_model(*model)) return with_status(404, "model '" + printable(*model) + "' not found", "model_not_found");
  out.stream = f.boolean("stream").value_or(true);
  if (nonempty(f.value("images"))) f.fail("images", "are not supported by kt-serve");
  if (const json* lp = f.value("logprobs"); lp && !lp->is_boolean()) f.fail("logprobs", "must be true or false");
  if (f.boolean("logprobs").value_or(false)) out.gen.logprobs = int32_t(f.integer("top_logprobs", 0, 20).value_or(0));
  if (const auto fmt = ordered.find("format"); fmt != ordered.end())
    if (auto e = read_ollama_format(&*fmt, &out.gen.grammar)) return e;
  if (nonempty(f.value("suffix"))) f.fail("suffix", "is not supported by kt-serve");
  const json* options = f.object("options");
  if (f.failed()) return f.error();

  // Ollama's defaults (api/types.go DefaultOptions).
  SamplerParams& sp = out.gen.sampling;
  sp.temperature = 0.8f;
  sp.top_k = 40;
  sp.top_p = 0.9f;
  sp.min_p = 0.0f;
  sp.repeat_penalty = 1.1f;
  sp.repeat_last_n = 64;
  out.gen.max_tokens = -1;
  if (!options) return std::nullopt;
  FieldReader o(*options, "options.");
  if (auto v = o.number("temperature", 0, 100)) sp.temperature = float(*v);
  if (auto v = o.integer("top_k", 0, 1 << 30)) sp.top_k = int32_t(*v);
  if (auto v = o.number("top_p", 0, 1)) sp.top_p = float(*v);
  if (auto v = o.number("min_p", 0, 1)) sp.min_p = float(*v);
  if (auto v = o.number("repeat_penalty", 0, 100)) sp.repeat_penalty = float(*v);
  if (auto v = o.integer("repeat_last_n", -1, 1 << 30)) sp.repeat_last_n = int32_t(*v);
  if (auto v = o.number("presence_penalty", -100, 100)) sp.presence_penalty = float(*v);
  if (auto v = o.number("frequency_penalty", -100, 100)) sp.frequency_penalty = float(*v);
  // Ollama's seed -1 (and none) is a random one.
  if (const json* s = o.value("seed"); s && !(s->is_number_integer() && s->get<int64_t>() == -1))
    if (auto v = o.seed("seed")) sp.seed = *v;
  // num_predict: -1 until the end, -2 until the context is full: both "no budget" here.
  if (auto v = o.integer("num_predict", -2, int64_t(1) << 30)) out.gen.max_tokens = *v < 0 ? -1 : *v;
  if (auto v = o.strings("stop", 16, 256)) out.gen.stop = std::move(*v);
  o.integer("num_ctx", 0, int64_t(1) << 30);  // a type check only: the context is the server's
  if (o.failed()) return o.error();
  return std::nullopt;
}

}  // namespace

// Ollama's think: true/false, or a level ("high", "medium", "low").
static std::optional<ApiError> read_think(const ojson& ordered, const ServeContext& ctx, ChatInput* in, OllamaRequest& out) {
  const auto think = ordered.find("think");
  if (think == ordered.end() || think->is_null()) return std::nullopt;
  bool on = false;
  if (think->is_boolean()) {
    on = think->get<bool>();
  } else if (think->is_string() && (*think == "high" || *think == "medium" || *think == "low")) {
    on = true;
    in->kwargs["reasoning_effort"] = *think;
  } else {
    return bad_request("think must be true, false, \"high\", \"medium\" or \"low\"", "think");
  }
  in->kwargs["enable_thinking"] = on;
  out.split_reasoning = on && ctx.options.reasoning_split;
  return std::nullopt;
}

std::optional<ApiError> read_ollama_chat(const json& body, const ojson& ordered, const ServeContext& ctx,
                                         OllamaRequest& out) {
  if (auto e = read_common(body, ordered, ctx, out)) return e;
  const auto it = ordered.find("messages");
  if (it == ordered.end() || it->is_null() || (it->is_array() && it->empty())) {
    out.empty = true;
    return std::nullopt;
  }
  if (!it->is_array()) return bad_request("messages must be a list of {role, content}", "messages");
  if (it->size() > kMaxMessages) return bad_request("too many messages", "messages");
  ChatInput in;
  // Ollama's tool calls have no ids: the k-th call and the k-th tool result
  // get the same one (templates that pair them need it).
  size_t n_calls = 0, n_results = 0;
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad_request(where + " must be an object", where);
    const auto role = m.find("role");
    static const char* const roles[] = {"system", "user", "assistant", "tool"};
    if (role == m.end() || !role->is_string() ||
        std::find(std::begin(roles), std::end(roles), role->get<std::string>()) == std::end(roles))
      return bad_request(where + ".role must be one of system, user, assistant, tool", where + ".role");
    const auto content = m.find("content");
    if (content != m.end() && !content->is_null() && !content->is_string())
      return bad_request(where + ".content must be a string", where + ".content");
    if (m.contains("images") && !m["images"].is_null() && !(m["images"].is_array() && m["images"].empty()))
      return bad_request(where + ".images are not supported by kt-serve", where + ".images");
    ojson msg = {{"role", *role}, {"content", content != m.end() && content->is_string() ? *content : ojson("")}};
    if (*role == "assistant") {
      if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
        if (!calls->is_array()) return bad_request(where + ".tool_calls must be a list", where + ".tool_calls");
        ojson tc = ojson::array();
        for (const ojson& c : *calls) {
          const auto fn = c.is_object() ? c.find("function") : c.end();
          if (fn == c.end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string())
            return bad_request(where + ".tool_calls must be [{function: {name, arguments}}]", where + ".tool_calls");
          std::string args = "{}";
          if (auto a = fn->find("arguments"); a != fn->end() && !a->is_null()) {
            if (a->is_object()) args = a->dump(-1, ' ', false, ojson::error_handler_t::replace);
            else if (a->is_string()) args = a->get<std::string>();
            else return bad_request(where + ".tool_calls[].function.arguments must be an object", where + ".tool_calls");
          }
          tc.push_back({{"id", nine_char_id("ollama-call-" + std::to_string(n_calls++))},
                        {"type", "function"},
                        {"function", {{"name", (*fn)["name"]}, {"arguments", args}}}});
        }
        if (!tc.empty()) msg["tool_calls"] = std::move(tc);
      }
      if (auto th = m.find("thinking"); th != m.end() && th->is_string()) msg["reasoning_content"] = *th;
    }
    if (*role == "tool") {
      msg["tool_call_id"] = nine_char_id("ollama-call-" + std::to_string(n_results++));
      if (auto name = m.find("tool_name"); name != m.end() && name->is_string()) msg["name"] = *name;
    }
    in.messages.push_back(std::move(msg));
  }
  if (auto e = read_tools(ordered, in)) return e;
  if (auto e = read_think(ordered, ctx, &in, out)) return e;
  ChatPrompt p = chat_prompt(ctx, in);
  if (p.error) return p.error;
  out.prompt = std::move(p.tokens);
  out.reasoning_open = p.reasoning_open;
  out.parse_tools = p.parse_tools;
  out.gen.render_special = p.render_special;
  return std::nullopt;
}

std::optional<ApiError> read_ollama_generate(const json& body, const ojson& ordered, const ServeContext& ctx,
                                             OllamaRequest& out) {
  if (auto e = read_common(body, ordered, ctx, out)) return e;
  FieldReader f(body);
  const std::string prompt = f.string("prompt", SIZE_MAX).value_or("");
  const std::optional<std::string> system = f.string("system", SIZE_MAX);
  const bool raw = f.boolean("raw").value_or(false);
  if (f.string("template", SIZE_MAX).value_or("") != "") f.fail("template", "is not supported: kt-serve uses the model's");
  std::vector<int32_t> context;
  if (const json* c = f.array("context")) {
    for (const json& t : *c) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX) {
        f.fail("context", "must be a list of token ids");
        break;
      }
      context.push_back(int32_t(t.get<int64_t>()));
    }
  }
  if (f.failed()) return f.error();
  if (prompt.empty() && context.empty()) {
    out.empty = true;
    return std::nullopt;
  }
  // Without a template (or raw) the prompt is the model's input as is.
  if (raw || !ctx.chat_template) {
    const std::string text = raw || !system ? prompt : *system + "\n\n" + prompt;
    out.prompt = context;
    const std::vector<int32_t> more =
        context.empty() ? tokenize_prompt(ctx.tokenizer, text, true)
                        : ctx.tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/true);
    out.prompt.insert(out.prompt.end(), more.begin(), more.end());
    return std::nullopt;
  }
  ChatInput in;
  if (system) in.messages.push_back({{"role", "system"}, {"content", *system}});
  in.messages.push_back({{"role", "user"}, {"content", prompt}});
  if (auto e = read_think(ordered, ctx, &in, out)) return e;
  ChatPrompt p = chat_prompt(ctx, in);
  if (p.error) return p.error;
  out.reasoning_open = p.reasoning_open;
  // A context from an earlier reply continues that conversation.
  out.prompt = std::move(context);
  out.prompt.insert(out.prompt.end(), p.tokens.begin(), p.tokens.end());
  return std::nullopt;
}

}  // namespace kt::serve
