// Mistral tool calls. Mistral 7B v0.3, Mixtral 8x22B, Nemo (v3 tokenizers):
//   [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abcdef123"}, ...]
// Mistral Small 3.x and later (v11): [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"} per call.
// The templates write the tools themselves ([AVAILABLE_TOOLS]).
#include "runtime/tool_calls.h"

namespace kt {

namespace {

using J = nlohmann::ordered_json;

constexpr std::string_view kCalls = "[TOOL_CALLS]", kArgs = "[ARGS]", kCallId = "[CALL_ID]";

class MistralToolCalls final : public ToolCallFormat {
 public:
  explicit MistralToolCalls(bool v11) : v11_(v11) {}
  const char* name() const override { return v11_ ? "mistral-v11" : "mistral"; }
  std::vector<std::string> triggers() const override { return {std::string(kCalls)}; }

  ParsedToolOutput parse(std::string_view text) const override {
    ParsedToolOutput out;
    const size_t first = text.find(kCalls);
    auto all_content = [&] {
      out.calls.clear();
      out.content = std::string(text);
      return out;
    };
    if (first == std::string_view::npos) return all_content();
    size_t at = first;
    while (at != std::string_view::npos) {
      size_t p = at + kCalls.size();
      while (p < text.size() && text[p] == ' ') ++p;
      if (p < text.size() && text[p] == '[') {  // a JSON list of calls
        const size_t end = tool_calls_detail::json_value_end(text, p);
        if (end == std::string_view::npos) return all_content();
        const J list = J::parse(text.substr(p, end - p), nullptr, false);
        if (!list.is_array() || list.empty()) return all_content();
        for (const J& c : list) {
          ToolCall call;
          if (!tool_calls_detail::call_from_json(c, &call)) return all_content();
          out.calls.push_back(std::move(call));
        }
        at = text.find(kCalls, end);
        continue;
      }
      // NAME([CALL_ID]ID)?[ARGS]{...}
      const size_t args = text.find(kArgs, p);
      if (args == std::string_view::npos) return all_content();
      ToolCall call;
      std::string_view head = text.substr(p, args - p);
      if (const size_t id = head.find(kCallId); id != std::string_view::npos) {
        call.id = std::string(head.substr(id + kCallId.size()));
        head = head.substr(0, id);
      }
      call.name = std::string(head);
      const size_t body = args + kArgs.size();
      const size_t end = tool_calls_detail::json_value_end(text, body);
      if (call.name.empty() || end == std::string_view::npos ||
          !tool_calls_detail::object_text(text.substr(body, end - body), &call.arguments))
        return all_content();
      out.calls.push_back(std::move(call));
      at = text.find(kCalls, end);
    }
    out.content = std::string(text.substr(0, first));
    return out;
  }

 protected:
  Result<uint32_t> one_call_rule(GrammarBuilder& b, JsonSchemaCompiler& c, const std::vector<ToolSpec>& tools,
                                 const std::vector<uint32_t>& args) const override {
    if (!v11_) return tool_calls_detail::name_arguments_object(b, c, tools, args);
    const uint32_t rule = b.add_rule("mistral-call");
    for (size_t i = 0; i < tools.size(); ++i) {
      GrammarBuilder::Seq s = b.literal(std::string(kCalls) + tools[i].name + std::string(kArgs));
      s.push_back(GrammarBuilder::ref(args[i]));
      b.add_alt(rule, s);
    }
    return rule;
  }
  std::string calls_open() const override { return v11_ ? "" : std::string(kCalls) + "["; }
  std::string calls_separator() const override { return v11_ ? "" : ", "; }
  std::string calls_close() const override { return v11_ ? "" : "]"; }

 private:
  bool v11_;
};

}  // namespace

std::unique_ptr<ToolCallFormat> make_mistral_tool_calls(bool v11) { return std::make_unique<MistralToolCalls>(v11); }

}  // namespace kt
