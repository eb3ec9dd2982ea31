// libFuzzer target: random template sources (parsed, then rendered with a real
// conversation) under a small step budget, so no template can loop, recurse or
// allocate without bound; errors are one value, never a crash.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Hello <b>&</b> \u4f60\u597d"},
                 {"role": "assistant", "content": "Hi", "tool_calls": [{"type": "function",
                   "function": {"name": "f", "arguments": {"x": 1}}}]},
                 {"role": "tool", "content": "42"}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
  })");
  const std::string_view src(reinterpret_cast<const char*>(data), size);
  auto tpl = kt::ChatTemplate::parse(src, "fuzz.jinja");
  if (!tpl.ok()) return 0;
  kt::ChatTemplateOptions opts;
  opts.max_steps = 200'000;
  opts.max_output_bytes = 1u << 20;
  (void)tpl->render(ctx, opts);
  return 0;
}
