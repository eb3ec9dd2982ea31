// DeepSeek tool calls. V3 and R1 (and the R1 distills):
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//   ```json
//   {"city": "Paris"}
//   ```<｜tool▁call▁end｜>
//   <｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>
// V3.1 and later: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>
// (calls chained without separators) ...<｜tool▁calls▁end｜>.
// The markers are control tokens of DeepSeek's vocabularies: the engine must
// render them (uses_special_tokens). Their templates do not write the tools:
// tools_prompt() is DeepSeek's documented system-prompt section.
#include "runtime/tool_calls.h"

namespace kt {

namespace {

using J = nlohmann::ordered_json;

const std::string kCallsBegin = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "begin\xEF\xBD\x9C>";
const std::string kCallsEnd = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "calls\xE2\x96\x81" "end\xEF\xBD\x9C>";
const std::string kCallBegin = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "begin\xEF\xBD\x9C>";
const std::string kCallEnd = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "call\xE2\x96\x81" "end\xEF\xBD\x9C>";
const std::string kSep = "<\xEF\xBD\x9Ctool\xE2\x96\x81" "sep\xEF\xBD\x9C>";

std::string dump(const J& j) { return j.dump(-1, ' ', false, J::error_handler_t::replace); }

class DeepSeekToolCalls final : public ToolCallFormat {
 public:
  explicit DeepSeekToolCalls(bool v3_1) : v3_1_(v3_1) {}
  const char* name() const override { return v3_1_ ? "deepseek-v3.1" : "deepseek"; }
  std::vector<std::string> triggers() const override { return {kCallsBegin, kCallBegin}; }
  bool uses_special_tokens() const override { return true; }

  ParsedToolOutput parse(std::string_view text) const override {
    ParsedToolOutput out;
    size_t first = text.find(kCallsBegin);
    if (first == std::string_view::npos) first = text.find(kCallBegin);
    if (first == std::string_view::npos) {
      out.content = std::string(text);
      return out;
    }
    auto all_content = [&] {
      out.calls.clear();
      out.content = std::string(text);
      return out;
    };
    size_t at = text.find(kCallBegin, first);
    while (at != std::string_view::npos) {
      size_t p = at + kCallBegin.size();
      const size_t sep = text.find(kSep, p);
      if (sep == std::string_view::npos) return all_content();
      std::string name;
      if (v3_1_) {
        name = std::string(text.substr(p, sep - p));
        p = sep + kSep.size();
      } else {  // TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```
        p = sep + kSep.size();
        const size_t nl = text.find('\n', p);
        if (nl == std::string_view::npos) return all_content();
        name = std::string(text.substr(p, nl - p));
        p = nl + 1;
        if (text.substr(p, 7) == "```json") p += 7;
      }
      while (!name.empty() && (name.back() == ' ' || name.back() == '\n')) name.pop_back();
      const size_t end = tool_calls_detail::json_value_end(text, p);
      ToolCall call;
      call.name = name;
      if (name.empty() || end == std::string_view::npos ||
          !tool_calls_detail::object_text(text.substr(p, end - p), &call.arguments))
        return all_content();
      out.calls.push_back(std::move(call));
      size_t next = end;
      const size_t call_end = text.find(kCallEnd, end);
      if (call_end != std::string_view::npos) next = call_end + kCallEnd.size();
      at = text.find(kCallBegin, next);
    }
    if (out.calls.empty()) return all_content();
    out.content = std::string(text.substr(0, first));
    return out;
  }

  std::string tools_prompt(const std::vector<ToolSpec>& tools) const override {
    std::string s = "## Tools\nYou have access to the following tools:\n";
    for (const ToolSpec& t : tools) {
      s += "\n### " + t.name + "\nDescription: " + t.description + "\n\nParameters: " + dump(t.parameters) + "\n";
    }
    s += "\nIMPORTANT: ALWAYS adhere to this exact format for tool use:\n";
    if (v3_1_) {
      s += kCallsBegin + kCallBegin + "tool_call_name" + kSep + "tool_call_arguments" + kCallEnd +
           "{{additional_tool_calls}}" + kCallsEnd +
           "\n\nWhere:\n\n- `tool_call_name` must be an exact match to one of the available tools\n"
           "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
           "- For multiple tool calls, chain them directly without separators or spaces";
    } else {
      s += kCallsBegin + kCallBegin + "function" + kSep + "tool_call_name\n```json\ntool_call_arguments\n```" +
           kCallEnd + kCallsEnd +
           "\n\nWhere:\n\n- `tool_call_name` must be an exact match to one of the available tools\n"
           "- `tool_call_arguments` must be valid JSON that strictly follows the tool's Parameters Schema\n"
           "- For multiple tool calls, separate them with a newline";
    }
    return s;
  }

 protected:
  Result<uint32_t> one_call_rule(GrammarBuilder& b, JsonSchemaCompiler&, const std::vector<ToolSpec>& tools,
                                 const std::vector<uint32_t>& args) const override {
    const uint32_t rule = b.add_rule("deepseek-call");
    for (size_t i = 0; i < tools.size(); ++i) {
      GrammarBuilder::Seq s;
      if (v3_1_) {
        s = b.literal(kCallBegin + tools[i].name + kSep);
        s.push_back(GrammarBuilder::ref(args[i]));
        b.append_literal(s, kCallEnd);
      } else {
        s = b.literal(kCallBegin + "function" + kSep + tools[i].name + "\n```json\n");
        s.push_back(GrammarBuilder::ref(args[i]));
        b.append_literal(s, "\n```" + kCallEnd);
      }
      b.add_alt(rule, s);
    }
    return rule;
  }
  std::string calls_open() const override { return kCallsBegin; }
  std::string calls_separator() const override { return v3_1_ ? "" : "\n"; }
  std::string calls_close() const override { return kCallsEnd; }

 private:
  bool v3_1_;
};

}  // namespace

std::unique_ptr<ToolCallFormat> make_deepseek_tool_calls(bool v3_1) { return std::make_unique<DeepSeekToolCalls>(v3_1); }

}  // namespace kt
