#include "tools/kt-serve/openai_request.h"

#include <algorithm>

#include "runtime/prompt.h"
#include "tools/kt-serve/chat_prompt.h"
#include "tools/kt-serve/field_reader.h"
#include "tools/kt-serve/output_constraint.h"

namespace kt::serve {

namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr int64_t kMaxTokensLimit = int64_t(1) << 30;
constexpr size_t kMaxStops = 16, kMaxStopBytes = 256;
constexpr size_t kMaxMessages = 4096;


// Fields both endpoints take. default_max_tokens: OpenAI's (chat: none, completions: 16).
std::optional<ApiError> read_common(const json& body, const ojson& ordered, const ServeContext& ctx,
                                    int64_t default_max_tokens, bool chat, OpenAiRequest& out) {
  FieldReader f(body);
  if (auto model = f.string("model", 512); model && !model->empty() && !ctx.is_model(*model))
    return model_not_found(*model);
  out.stream = f.boolean("stream").value_or(false);
  if (const json* so = f.object("stream_options")) {
    FieldReader s(*so, "stream_options.");
    out.include_usage = s.boolean("include_usage").value_or(false);
    if (s.failed()) return s.error();
  }
  SamplerParams& sp = out.gen.sampling;
  // OpenAI's sampling is temperature and top-p alone: llama.cpp's top-k and
  // min-p are off unless asked for (by their llama.cpp names).
  sp.temperature = float(f.number("temperature", 0, 2).value_or(1.0));
  sp.top_p = float(f.number("top_p", 0, 1).value_or(1.0));
  sp.top_k = int32_t(f.integer("top_k", 0, 1 << 30).value_or(0));
  sp.min_p = float(f.number("min_p", 0, 1).value_or(0.0));
  sp.presence_penalty = float(f.number("presence_penalty", -2, 2).value_or(0.0));
  sp.frequency_penalty = float(f.number("frequency_penalty", -2, 2).value_or(0.0));
  sp.repeat_penalty = float(f.number("repeat_penalty", 0, 10).value_or(1.0));
  if (auto seed = f.seed("seed")) sp.seed = *seed;
  out.gen.prompt_cache = f.boolean("cache_prompt").value_or(true);  // llama.cpp's
  out.gen.max_tokens = default_max_tokens;
  if (auto n = f.integer("max_tokens", 1, kMaxTokensLimit)) out.gen.max_tokens = *n;
  if (auto n = f.integer("max_completion_tokens", 1, kMaxTokensLimit)) out.gen.max_tokens = *n;
  if (auto stop = f.strings("stop", kMaxStops, kMaxStopBytes)) out.gen.stop = std::move(*stop);
  if (auto n = f.integer("n", 1, 128); n && *n != 1) f.fail("n", "must be 1: kt-serve answers with one choice");
  // Refused rather than silently ignored.
  if (!chat && nonempty(f.value("tools"))) f.fail("tools", "are for /v1/chat/completions");
  if (nonempty(f.value("functions")) || nonempty(f.value("function_call")))
    f.fail("functions", "(the deprecated form) are not supported: use tools");
  // logprobs: chat's is a boolean with top_logprobs beside it; completions'
  // is the number of most likely tokens to list.
  if (chat) {
    const bool lp = f.boolean("logprobs").value_or(false);
    const auto top = f.integer("top_logprobs", 0, 20);
    if (top && !lp) f.fail("top_logprobs", "needs logprobs: true");
    if (lp) out.gen.logprobs = int32_t(top.value_or(0));
  } else if (auto lp = f.integer("logprobs", 0, 20)) {
    out.gen.logprobs = int32_t(*lp);
  }
  if (const json* lb = f.value("logit_bias"); nonempty(lb)) f.fail("logit_bias", "is not supported by kt-serve");
  if (nonempty(f.value("audio")) || nonempty(f.value("modalities")))
    f.fail("audio", "is not supported by kt-serve (text only)");
  if (f.boolean("echo").value_or(false)) f.fail("echo", "is not supported by kt-serve");
  if (auto suffix = f.string("suffix", 1 << 20); suffix && !suffix->empty())
    f.fail("suffix", "is not supported by kt-serve");
  if (auto best_of = f.integer("best_of", 1, 128); best_of && *best_of != 1) f.fail("best_of", "must be 1");
  f.object("response_format");  // a type check; read in order below
  if (f.failed()) return f.error();
  const auto rf = ordered.find("response_format");
  if (auto e = read_response_format(rf == ordered.end() ? nullptr : &*rf, &out.gen.grammar)) return e;
  return std::nullopt;
}

// One message's content: a string, null, or a list of text parts.
std::optional<std::string> message_content(const ojson& content, size_t index, std::optional<ApiError>& error) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    error = bad_request("'" + where + "' must be a string or a list of parts", where);
    return std::nullopt;
  }
  std::string text;
  for (const ojson& part : content) {
    const ojson* type = part.is_object() && part.contains("type") ? &part["type"] : nullptr;
    if (!type || *type != ojson("text") || !part.contains("text") || !part["text"].is_string()) {
      error = bad_request("'" + where + "' parts must be {\"type\": \"text\", \"text\": string}: only text is supported",
                          where);
      return std::nullopt;
    }
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

// An assistant message's tool_calls: [{id, type, function: {name, arguments}}],
// arguments as JSON text (an object is taken too, and written as text).
std::optional<ApiError> read_tool_calls(const ojson& calls, const std::string& where, ojson* out) {
  if (!calls.is_array()) return bad_request("'" + where + "' must be a list", where);
  *out = ojson::array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string w = where + "[" + std::to_string(k) + "]";
    const ojson& c = calls[k];
    const auto fn = c.is_object() ? c.find("function") : c.end();
    if (!c.is_object() || fn == c.end() || !fn->is_object())
      return bad_request("'" + w + "' must be {id, type: \"function\", function: {name, arguments}}", w);
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      return bad_request("'" + w + ".function.name' must be a non-empty string", w);
    std::string args = "{}";
    if (auto a = fn->find("arguments"); a != fn->end() && !a->is_null()) {
      if (a->is_string()) args = a->get<std::string>();
      else if (a->is_object()) args = a->dump(-1, ' ', false, ojson::error_handler_t::replace);
      else return bad_request("'" + w + ".function.arguments' must be a JSON string", w);
    }
    std::string id;
    if (auto i = c.find("id"); i != c.end() && !i->is_null()) {
      if (!i->is_string()) return bad_request("'" + w + ".id' must be a string", w);
      id = i->get<std::string>();
    }
    out->push_back({{"id", id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", args}}}});
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> read_chat_request(const json& body, const ojson& ordered, const ServeContext& ctx,
                                          OpenAiRequest& out) {
  if (auto e = read_common(body, ordered, ctx, /*default_max_tokens=*/-1, /*chat=*/true, out)) return e;
  const auto it = ordered.find("messages");
  if (it == ordered.end() || !it->is_array() || it->empty())
    return bad_request("'messages' must be a non-empty list of {role, content}", "messages");
  if (it->size() > kMaxMessages)
    return bad_request("'messages' holds more than " + std::to_string(kMaxMessages) + " messages", "messages");
  ChatInput in;
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad_request("'" + where + "' must be an object", where);
    const auto role = m.find("role");
    static const char* const roles[] = {"system", "developer", "user", "assistant", "tool"};
    if (role == m.end() || !role->is_string() ||
        std::find(std::begin(roles), std::end(roles), role->get<std::string>()) == std::end(roles))
      return bad_request("'" + where + ".role' must be one of system, developer, user, assistant, tool", where + ".role");
    std::optional<ApiError> error;
    const auto content = message_content(m.contains("content") ? m["content"] : ojson(), i, error);
    if (!content) return error;
    // OpenAI's "developer" is what templates call "system".
    const std::string r = role->get<std::string>() == "developer" ? "system" : role->get<std::string>();
    ojson msg = {{"role", r}};
    // An assistant turn of tool calls has no content (null), as OpenAI sends it.
    const bool null_content = r == "assistant" && (!m.contains("content") || m["content"].is_null());
    msg["content"] = null_content ? ojson() : ojson(*content);
    if (r == "assistant") {
      if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
        ojson tc;
        if (auto e = read_tool_calls(*calls, where + ".tool_calls", &tc)) return e;
        if (!tc.empty()) msg["tool_calls"] = std::move(tc);
      }
      if (auto rc = m.find("reasoning_content"); rc != m.end() && rc->is_string()) msg["reasoning_content"] = *rc;
    }
    if (r == "tool") {
      const auto id = m.find("tool_call_id");
      if (id != m.end() && !id->is_string() && !id->is_null())
        return bad_request("'" + where + ".tool_call_id' must be a string", where + ".tool_call_id");
      if (id != m.end() && id->is_string()) msg["tool_call_id"] = *id;
    }
    if (auto name = m.find("name"); name != m.end() && name->is_string()) msg["name"] = *name;
    in.messages.push_back(std::move(msg));
  }
  // Tools, the choice among them, and whether several calls may come at once.
  if (auto e = read_tools(ordered, in)) return e;
  if (auto tc = ordered.find("tool_choice"); tc != ordered.end() && !tc->is_null()) {
    if (tc->is_string()) {
      const std::string& c = tc->get_ref<const std::string&>();
      if (c == "auto") in.tool_choice = ToolChoice::Auto;
      else if (c == "none") in.tool_choice = ToolChoice::None;
      else if (c == "required") in.tool_choice = ToolChoice::Required;
      else return bad_request("'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
    } else if (tc->is_object() && tc->contains("function") && (*tc)["function"].is_object() &&
               (*tc)["function"].contains("name") && (*tc)["function"]["name"].is_string()) {
      in.tool_choice = ToolChoice::Named;
      in.named_tool = (*tc)["function"]["name"].get<std::string>();
      bool known = false;
      for (const ToolSpec& s : in.specs) known |= s.name == in.named_tool;
      if (!known) return bad_request("'tool_choice' names '" + printable(in.named_tool, 64) + "', which is not among the tools", "tool_choice");
    } else {
      return bad_request("'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice");
    }
    if ((in.tool_choice == ToolChoice::Required) && in.specs.empty())
      return bad_request("'tool_choice' is required but there are no tools", "tool_choice");
  }
  FieldReader f(body);
  in.parallel_tool_calls = f.boolean("parallel_tool_calls").value_or(true);
  out.split_reasoning = ctx.options.reasoning_split;
  if (auto rf = f.string("reasoning_format", 64)) {
    if (*rf != "none" && *rf != "deepseek" && *rf != "auto") f.fail("reasoning_format", "must be none, auto or deepseek");
    out.split_reasoning = *rf != "none";
  }
  if (f.failed()) return f.error();
  if (auto kw = ordered.find("chat_template_kwargs"); kw != ordered.end() && !kw->is_null()) {
    if (!kw->is_object()) return bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    for (auto k = kw->begin(); k != kw->end(); ++k) {
      if (k.key() == "messages" || k.key() == "tools" || k.key() == "add_generation_prompt")
        return bad_request("'chat_template_kwargs' may not set '" + printable(k.key(), 40) + "'", "chat_template_kwargs");
      in.kwargs[k.key()] = k.value();
    }
  }
  ChatPrompt p = chat_prompt(ctx, in);
  if (p.error) return p.error;
  if (p.grammar) {
    if (out.gen.grammar) return bad_request("'response_format' cannot be combined with tool_choice required or a named function", "response_format");
    out.gen.grammar = std::move(p.grammar);
    out.forced_tool_call = true;
  }
  out.prompt = std::move(p.tokens);
  out.reasoning_open = p.reasoning_open;
  out.parse_tools = p.parse_tools;
  out.gen.render_special = p.render_special;
  return std::nullopt;
}

std::optional<ApiError> read_completion_request(const json& body, const ojson& ordered, const ServeContext& ctx,
                                                OpenAiRequest& out) {
  if (auto e = read_common(body, ordered, ctx, /*default_max_tokens=*/16, /*chat=*/false, out)) return e;
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad_request("'prompt' is required", "prompt");
  const json* p = &*it;
  // A list of one prompt (OpenAI's batch form) is that prompt.
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    out.prompt = tokenize_prompt(ctx.tokenizer, p->get_ref<const std::string&>(), /*parse_special=*/true);
    return std::nullopt;
  }
  if (p->is_array() && !p->empty()) {
    for (const json& t : *p) {
      if (!t.is_number_integer() || t.get<int64_t>() < INT32_MIN || t.get<int64_t>() > INT32_MAX)
        return bad_request("'prompt' as tokens must be a list of integers (token ids)", "prompt");
      out.prompt.push_back(int32_t(t.get<int64_t>()));
    }
    return std::nullopt;  // the engine checks that each is in the vocabulary
  }
  return bad_request("'prompt' must be a string, a list of token ids, or a list of one of either (n = 1)", "prompt");
}

}  // namespace kt::serve
