// What every tool-call format shares (tool_calls.h): the grammar of a list of
// calls, the tools' system prompt, JSON extents, the choice of format for a
// template, and the plain JSON format for templates without a syntax.
#include "runtime/tool_calls.h"

#include <cctype>

namespace kt {

namespace {

using J = nlohmann::ordered_json;

std::string dump(const J& j) { return j.dump(-1, ' ', false, J::error_handler_t::replace); }

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

namespace tool_calls_detail {

size_t json_value_end(std::string_view text, size_t pos) {
  while (pos < text.size() && is_ws(text[pos])) ++pos;
  if (pos >= text.size()) return std::string_view::npos;
  const char c = text[pos];
  if (c == '{' || c == '[' || c == '"') {
    int depth = 0;
    bool in_string = false;
    for (size_t i = pos; i < text.size(); ++i) {
      const char x = text[i];
      if (in_string) {
        if (x == '\\') ++i;
        else if (x == '"') {
          in_string = false;
          if (depth == 0) return i + 1;
        }
      } else if (x == '"') {
        in_string = true;
      } else if (x == '{' || x == '[') {
        ++depth;
      } else if (x == '}' || x == ']') {
        if (--depth == 0) return i + 1;
        if (depth < 0) return std::string_view::npos;
      }
    }
    return std::string_view::npos;
  }
  size_t i = pos;
  while (i < text.size() && (std::isalnum(uint8_t(text[i])) || text[i] == '-' || text[i] == '+' || text[i] == '.')) ++i;
  return i > pos ? i : std::string_view::npos;
}

bool object_text(std::string_view text, std::string* out) {
  const J j = J::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return false;
  *out = dump(j);
  return true;
}

bool call_from_json(const J& j, ToolCall* out) {
  if (!j.is_object()) return false;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return false;
  auto args = j.find("arguments");
  if (args == j.end()) args = j.find("parameters");
  ToolCall c;
  c.name = name->get<std::string>();
  if (args == j.end() || args->is_null()) {
    c.arguments = "{}";
  } else if (args->is_object()) {
    c.arguments = dump(*args);
  } else if (args->is_string() && object_text(args->get_ref<const std::string&>(), &c.arguments)) {
    // arguments written as a JSON string holding the object
  } else {
    return false;
  }
  if (auto id = j.find("id"); id != j.end() && id->is_string()) c.id = id->get<std::string>();
  *out = std::move(c);
  return true;
}

Result<uint32_t> name_arguments_object(GrammarBuilder& b, JsonSchemaCompiler& c, const std::vector<ToolSpec>& tools,
                                       const std::vector<uint32_t>& args, const char* args_key) {
  const uint32_t ws = c.ws();
  const uint32_t rule = b.add_rule("call-object");
  for (size_t i = 0; i < tools.size(); ++i) {
    GrammarBuilder::Seq s;
    auto lit = [&](std::string_view t) { b.append_literal(s, t); };
    auto w = [&] { s.push_back(GrammarBuilder::ref(ws)); };
    lit("{");
    w();
    lit("\"name\"");
    w();
    lit(":");
    w();
    lit(dump(J(tools[i].name)));
    w();
    lit(",");
    w();
    lit(dump(J(args_key)));
    w();
    lit(":");
    w();
    s.push_back(GrammarBuilder::ref(args[i]));
    w();
    lit("}");
    b.add_alt(rule, s);
  }
  return rule;
}

}  // namespace tool_calls_detail

std::string ToolCallFormat::tools_prompt(const std::vector<ToolSpec>& tools) const {
  std::string s = "# Tools\n\nYou may call one or more functions to assist with the user query. The functions:\n";
  for (const ToolSpec& t : tools) {
    J f = {{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}};
    s += dump(f) + "\n";
  }
  s += "\nTo call functions, answer with nothing but " + std::string(name()) + " tool calls:\n";
  s += calls_open() + std::string("{\"name\":\"NAME\",\"arguments\":{ARGUMENTS}}") + calls_close();
  return s;
}

Result<uint32_t> ToolCallFormat::calls_rule(GrammarBuilder& b, const std::vector<ToolSpec>& tools, bool parallel) const {
  if (tools.empty()) return err("no tools to call");
  JsonSchemaCompiler c(b);
  std::vector<uint32_t> args;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
    J schema = tools[i].parameters;
    if (schema.is_null() || (schema.is_object() && schema.empty())) schema = J{{"type", "object"}};
    if (schema.is_object()) {
      const auto type = schema.find("type");
      if (type != schema.end() && !(type->is_string() && type->get_ref<const std::string&>() == "object"))
        return err(where, ": a function's parameters must be an object schema (\"type\": \"object\")");
      if (type == schema.end()) schema["type"] = "object";
    }
    auto r = c.compile(schema, where);
    if (!r.ok()) return r.error();
    args.push_back(*r);
  }
  auto one = one_call_rule(b, c, tools, args);
  if (!one.ok()) return one.error();
  GrammarBuilder::Seq call{GrammarBuilder::ref(*one)};
  const uint32_t list = parallel ? b.repeat_separated(call, b.literal(calls_separator()), 1, -1, "calls")
                                 : b.repeat(call, 1, 1, "calls");
  const uint32_t rule = b.add_rule("tool-calls");
  GrammarBuilder::Seq s = b.literal(calls_open());
  s.push_back(GrammarBuilder::ref(list));
  b.append_literal(s, calls_close());
  b.add_alt(rule, s);
  return rule;
}

Result<Grammar> ToolCallFormat::calls_grammar(const std::vector<ToolSpec>& tools, bool parallel) const {
  GrammarBuilder b;
  auto r = calls_rule(b, tools, parallel);
  if (!r.ok()) return r.error();
  return b.finish(*r);
}

namespace {

// {"tool_calls": [{"name": .., "arguments": {..}}, ..]} for templates with
// no tool-call syntax of their own.
class JsonToolCalls final : public ToolCallFormat {
 public:
  const char* name() const override { return "json"; }
  std::vector<std::string> triggers() const override { return {"{\"tool_calls\""}; }
  ParsedToolOutput parse(std::string_view text) const override {
    ParsedToolOutput out;
    size_t at = text.find("{\"tool_calls\"");
    const size_t end = at == std::string_view::npos ? at : tool_calls_detail::json_value_end(text, at);
    if (end == std::string_view::npos) {
      out.content = std::string(text);
      return out;
    }
    const J j = J::parse(text.substr(at, end - at), nullptr, false);
    const auto calls = j.is_object() ? j.find("tool_calls") : j.end();
    if (j.is_discarded() || calls == j.end() || !calls->is_array() || calls->empty()) {
      out.content = std::string(text);
      return out;
    }
    for (const J& c : *calls) {
      ToolCall call;
      if (!tool_calls_detail::call_from_json(c, &call)) {
        out.calls.clear();
        out.content = std::string(text);
        return out;
      }
      out.calls.push_back(std::move(call));
    }
    out.content = std::string(text.substr(0, at)) + std::string(text.substr(end));
    return out;
  }

 protected:
  Result<uint32_t> one_call_rule(GrammarBuilder& b, JsonSchemaCompiler& c, const std::vector<ToolSpec>& tools,
                                 const std::vector<uint32_t>& args) const override {
    return tool_calls_detail::name_arguments_object(b, c, tools, args);
  }
  std::string calls_open() const override { return "{\"tool_calls\":["; }
  std::string calls_separator() const override { return ","; }
  std::string calls_close() const override { return "]}"; }
};

}  // namespace

std::unique_ptr<ToolCallFormat> make_json_tool_calls() { return std::make_unique<JsonToolCalls>(); }

std::unique_ptr<ToolCallFormat> tool_call_format_for(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has("tool\xE2\x96\x81" "calls\xE2\x96\x81" "begin")) return make_deepseek_tool_calls(/*v3_1=*/!has("```json"));
  if (has("[TOOL_CALLS]")) return make_mistral_tool_calls(/*v11=*/has("[ARGS]"));
  if (has("<tool_call>") && !has("<function=")) return make_hermes_tool_calls();
  return make_json_tool_calls();
}

}  // namespace kt
