#include "tools/kt-serve/openai_request.h"

#include <algorithm>

#include "runtime/prompt.h"
#include "tools/kt-serve/chat_prompt.h"
#include "tools/kt-serve/field_reader.h"

namespace kt::serve {

namespace {

using nlohmann::json;

constexpr int64_t kMaxTokensLimit = int64_t(1) << 30;
constexpr size_t kMaxStops = 16, kMaxStopBytes = 256;
constexpr size_t kMaxMessages = 4096;


// Fields both endpoints take. default_max_tokens: OpenAI's (chat: none, completions: 16).
std::optional<ApiError> read_common(const json& body, const ServeContext& ctx, int64_t default_max_tokens,
                                    OpenAiRequest& out) {
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
  out.gen.max_tokens = default_max_tokens;
  if (auto n = f.integer("max_tokens", 1, kMaxTokensLimit)) out.gen.max_tokens = *n;
  if (auto n = f.integer("max_completion_tokens", 1, kMaxTokensLimit)) out.gen.max_tokens = *n;
  if (auto stop = f.strings("stop", kMaxStops, kMaxStopBytes)) out.gen.stop = std::move(*stop);
  if (auto n = f.integer("n", 1, 128); n && *n != 1) f.fail("n", "must be 1: kt-serve answers with one choice");
  // Refused rather than silently ignored.
  if (nonempty(f.value("tools")) || nonempty(f.value("functions"))) f.fail("tools", "are not supported by kt-serve");
  if (const json* rf = f.object("response_format"))
    if (rf->value("type", json("text")) != json("text")) f.fail("response_format", "other than text is not supported");
  if (const json* lp = f.value("logprobs"); lp && *lp != json(false) && *lp != json(0))
    f.fail("logprobs", "are not supported by kt-serve");
  if (const json* lb = f.value("logit_bias"); nonempty(lb)) f.fail("logit_bias", "is not supported by kt-serve");
  if (f.boolean("echo").value_or(false)) f.fail("echo", "is not supported by kt-serve");
  if (auto suffix = f.string("suffix", 1 << 20); suffix && !suffix->empty())
    f.fail("suffix", "is not supported by kt-serve");
  if (auto best_of = f.integer("best_of", 1, 128); best_of && *best_of != 1) f.fail("best_of", "must be 1");
  if (f.failed()) return f.error();
  return std::nullopt;
}

// One message's content: a string, null, or a list of text parts.
std::optional<std::string> message_content(const json& content, size_t index, std::optional<ApiError>& error) {
  const std::string where = "messages[" + std::to_string(index) + "].content";
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) {
    error = bad_request("'" + where + "' must be a string or a list of parts", where);
    return std::nullopt;
  }
  std::string text;
  for (const json& part : content) {
    const json* type = part.is_object() && part.contains("type") ? &part["type"] : nullptr;
    if (!type || *type != json("text") || !part.contains("text") || !part["text"].is_string()) {
      error = bad_request("'" + where + "' parts must be {\"type\": \"text\", \"text\": string}: only text is supported",
                          where);
      return std::nullopt;
    }
    if (!text.empty()) text += "\n";
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

std::optional<ApiError> read_chat_request(const json& body, const ServeContext& ctx, OpenAiRequest& out) {
  if (auto e = read_common(body, ctx, /*default_max_tokens=*/-1, out)) return e;
  const auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    return bad_request("'messages' must be a non-empty list of {role, content}", "messages");
  if (it->size() > kMaxMessages)
    return bad_request("'messages' holds more than " + std::to_string(kMaxMessages) + " messages", "messages");
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad_request("'" + where + "' must be an object", where);
    const auto role = m.find("role");
    static const char* const roles[] = {"system", "developer", "user", "assistant", "tool"};
    if (role == m.end() || !role->is_string() ||
        std::find(std::begin(roles), std::end(roles), role->get<std::string>()) == std::end(roles))
      return bad_request("'" + where + ".role' must be one of system, developer, user, assistant, tool", where + ".role");
    std::optional<ApiError> error;
    const auto content = message_content(m.contains("content") ? m["content"] : json(), i, error);
    if (!content) return error;
    // OpenAI's "developer" is what templates call "system".
    const std::string r = role->get<std::string>() == "developer" ? "system" : role->get<std::string>();
    messages.push_back({{"role", r}, {"content", *content}});
  }
  ChatPrompt p = chat_prompt(ctx, messages);
  if (p.error) return p.error;
  out.prompt = std::move(p.tokens);
  return std::nullopt;
}

std::optional<ApiError> read_completion_request(const json& body, const ServeContext& ctx, OpenAiRequest& out) {
  if (auto e = read_common(body, ctx, /*default_max_tokens=*/16, out)) return e;
  const auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return bad_request("'prompt' is required", "prompt");
  const json* p = &*it;
  // A list of one prompt (OpenAI's batch form) is that prompt.
  if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) p = &(*p)[0];
  if (p->is_string()) {
    out.prompt = tokenize_prompt(ctx.engine.tokenizer(), p->get_ref<const std::string&>(), /*parse_special=*/true);
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
