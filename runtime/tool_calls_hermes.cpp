// Hermes-style tool calls, as Qwen2.5 and Qwen3 templates write them:
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
// several separated by a newline.
#include "runtime/tool_calls.h"

namespace kt {

namespace {

using J = nlohmann::ordered_json;

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

class HermesToolCalls final : public ToolCallFormat {
 public:
  const char* name() const override { return "hermes"; }
  std::vector<std::string> triggers() const override { return {std::string(kOpen)}; }

  ParsedToolOutput parse(std::string_view text) const override {
    ParsedToolOutput out;
    const size_t first = text.find(kOpen);
    if (first == std::string_view::npos) {
      out.content = std::string(text);
      return out;
    }
    size_t at = first, last_end = first;
    while (at != std::string_view::npos) {
      const size_t body = at + kOpen.size();
      size_t close = text.find(kClose, body);
      size_t json_end = close;
      if (close == std::string_view::npos) {  // a call cut short of its closing tag
        json_end = tool_calls_detail::json_value_end(text, body);
        if (json_end == std::string_view::npos) break;
      }
      ToolCall call;
      if (!tool_calls_detail::call_from_json(J::parse(text.substr(body, json_end - body), nullptr, false), &call)) {
        out.calls.clear();
        out.content = std::string(text);
        return out;
      }
      out.calls.push_back(std::move(call));
      last_end = close == std::string_view::npos ? json_end : close + kClose.size();
      at = text.find(kOpen, last_end);
    }
    if (out.calls.empty()) {
      out.content = std::string(text);
      return out;
    }
    std::string_view tail = text.substr(last_end);
    while (!tail.empty() && (tail.front() == '\n' || tail.front() == ' ')) tail.remove_prefix(1);
    out.content.assign(text.substr(0, first));
    out.content.append(tail);
    return out;
  }

 protected:
  Result<uint32_t> one_call_rule(GrammarBuilder& b, JsonSchemaCompiler& c, const std::vector<ToolSpec>& tools,
                                 const std::vector<uint32_t>& args) const override {
    auto obj = tool_calls_detail::name_arguments_object(b, c, tools, args);
    if (!obj.ok()) return obj;
    const uint32_t rule = b.add_rule("hermes-call");
    GrammarBuilder::Seq s = b.literal(kOpen);
    b.append_literal(s, "\n");
    s.push_back(GrammarBuilder::ref(*obj));
    b.append_literal(s, "\n");
    b.append_literal(s, kClose);
    b.add_alt(rule, s);
    return rule;
  }
  std::string calls_separator() const override { return "\n"; }
};

}  // namespace

std::unique_ptr<ToolCallFormat> make_hermes_tool_calls() { return std::make_unique<HermesToolCalls>(); }

}  // namespace kt
