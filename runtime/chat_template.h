// Chat templates: renders a model's Jinja chat template (GGUF
// tokenizer.chat_template, or a Hugging Face tokenizer_config.json) byte for
// byte as transformers' apply_chat_template does, with a Jinja-subset
// interpreter written for it (runtime/jinja_*.cpp).
//
// transformers renders with jinja2's ImmutableSandboxedEnvironment
// (trim_blocks, lstrip_blocks, loop controls), a json.dumps-based tojson and
// the globals raise_exception and strftime_now; so does this. Typical use:
//
//   auto tpl = kt::ChatTemplate::parse(source, "model.gguf:tokenizer.chat_template");
//   nlohmann::ordered_json ctx = {{"messages", messages},
//                                 {"add_generation_prompt", true},
//                                 {"bos_token", bos}, {"eos_token", eos}};
//   if (has_tools) ctx["tools"] = tools;      // absent, not null, when none
//   auto prompt = tpl->render(ctx);
//
// Use nlohmann::ordered_json for messages and tools: templates print dicts
// with tojson in their key order, so key order is part of the prompt.
//
// Safety: the server renders untrusted messages and may load untrusted
// templates. Parsing and rendering never throw or crash; rendering is bounded
// in steps, nesting, macro recursion and output size (see ChatTemplateOptions)
// and fails with an error naming template line and column.
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "runtime/result.h"

namespace kt {

namespace jinja {
struct Template;
}

struct ChatTemplateOptions {
  // Statements, expressions, loop iterations and value walks cost a step each,
  // every 16 bytes produced another: ~1 s and <= 320 MB of allocation at most.
  uint64_t max_steps = 20'000'000;
  int max_call_depth = 40;              // nested macro calls
  int max_nesting = 400;                // evaluator recursion depth (~1 KiB of stack each)
  size_t max_output_bytes = 16u << 20;  // the prompt, and any string built on the way
  // llama.cpp-style leniency: list.append/pop & co., a from_json filter, tojson
  // of generators. Off: exactly what transformers accepts.
  bool lenient = false;
  // The time strftime_now() formats; unset: the local time when rendering.
  std::optional<std::tm> now;
};

class ChatTemplate {
 public:
  // Parses once; errors name "name:line:col". The source is the template text
  // as shipped (jinja2 normalizes \r\n and drops one trailing newline).
  static Result<ChatTemplate> parse(std::string_view source, std::string name = "chat_template");

  // Renders with the variables of `context` (a JSON object: messages,
  // add_generation_prompt, bos_token, eos_token, tools, any extra kwargs).
  // Errors name the template position; for raise_exception the message ends
  // with the template's own text.
  Result<std::string> render(const nlohmann::ordered_json& context,
                             const ChatTemplateOptions& options = {}) const;

  const std::string& name() const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Template> tpl) : tpl_(std::move(tpl)) {}
  std::shared_ptr<const jinja::Template> tpl_;
};

}  // namespace kt
