#include "tools/kt-serve/chat_prompt.h"

#include "runtime/prompt.h"
#include "runtime/reasoning_split.h"

namespace kt::serve {

ChatPrompt chat_prompt(const ServeContext& ctx, const ChatInput& in) {
  ChatPrompt out;
  if (!ctx.chat_template) {
    out.error = bad_request("the model has no chat template (GGUF tokenizer.chat_template): start kt-serve with "
                            "--chat-template FILE, or use the completion endpoints",
                            "messages", "no_chat_template");
    return out;
  }
  const Tokenizer& tok = ctx.tokenizer;
  const bool use_tools = !in.specs.empty() && in.tool_choice != ToolChoice::None;
  const std::vector<ToolSpec> none;
  const nlohmann::ordered_json context =
      chat_template_context(ctx.template_caps, *ctx.tool_format, in.messages, in.tools, use_tools ? in.specs : none,
                            /*add_generation_prompt=*/true, tok.bos() >= 0 ? tok.token_text(tok.bos()) : "",
                            tok.eos() >= 0 ? tok.token_text(tok.eos()) : "", in.kwargs);
  auto text = ctx.chat_template->render(context);
  if (!text.ok()) {
    out.error = bad_request("the chat template refused the messages: " + text.error().message, "messages");
    return out;
  }
  out.text = std::move(*text);
  out.tokens = tokenize_prompt(tok, out.text, /*parse_special=*/true);
  out.reasoning_open = prompt_opens_reasoning(out.text);
  out.parse_tools = use_tools;
  out.render_special = use_tools && ctx.tool_format->uses_special_tokens();
  if (use_tools && (in.tool_choice == ToolChoice::Required || in.tool_choice == ToolChoice::Named)) {
    std::vector<ToolSpec> callable;
    for (const ToolSpec& s : in.specs)
      if (in.tool_choice == ToolChoice::Required || s.name == in.named_tool) callable.push_back(s);
    auto g = ctx.tool_format->calls_grammar(callable, in.parallel_tool_calls && in.tool_choice == ToolChoice::Required);
    if (!g.ok()) {
      out.error = bad_request(g.error().message, "tools");
      return out;
    }
    out.grammar = std::make_shared<const Grammar>(std::move(*g));
  }
  return out;
}

std::optional<ApiError> read_tools(const nlohmann::ordered_json& request, ChatInput& in) {
  const auto t = request.find("tools");
  if (t == request.end() || t->is_null()) return std::nullopt;
  auto specs = parse_tool_specs(*t);
  if (!specs.ok()) return bad_request(specs.error().message, "tools");
  in.specs = std::move(*specs);
  in.tools = *t;
  return std::nullopt;
}

}  // namespace kt::serve
