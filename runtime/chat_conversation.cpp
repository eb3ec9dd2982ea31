// Conversations as chat templates want them (chat_conversation.h).
#include "runtime/chat_conversation.h"

#include <cctype>
#include <utility>
#include <vector>

namespace kt {

namespace {

using J = nlohmann::ordered_json;

constexpr const char* kProbeTool = "kt_probe_tool";
constexpr const char* kProbeFn = "kt_probe_fn";
constexpr const char* kProbeArgs = "{\"kt_probe_arg\": 1}";

J probe_tools() {
  return J::array({{{"type", "function"},
                    {"function",
                     {{"name", kProbeTool},
                      {"description", "probe"},
                      {"parameters", {{"type", "object"}, {"properties", {{"kt_probe_arg", {{"type", "string"}}}}}}}}}}});
}

J probe_conversation(bool object_args, bool null_content, const std::string& id) {
  J args = object_args ? J{{"kt_probe_arg", 1}} : J(kProbeArgs);
  J assistant = {{"role", "assistant"},
                 {"content", null_content ? J() : J("")},
                 {"tool_calls", J::array({{{"id", id}, {"type", "function"}, {"function", {{"name", kProbeFn}, {"arguments", args}}}}})}};
  return J::array({{{"role", "user"}, {"content", "kt_probe_question"}},
                   assistant,
                   {{"role", "tool"}, {"tool_call_id", id}, {"name", kProbeFn}, {"content", "kt_probe_result"}},
                   {{"role", "assistant"}, {"content", "kt_probe_answer"}},
                   {{"role", "user"}, {"content", "kt_probe_again"}}});
}

bool valid_name_char(char c) { return std::isalnum(uint8_t(c)) || c == '_' || c == '-' || c == '.'; }

}  // namespace

std::string nine_char_id(const std::string& id) {
  bool ok = id.size() == 9;
  for (char c : id) ok = ok && std::isalnum(uint8_t(c));
  if (ok) return id;
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : id) h = (h ^ uint8_t(c)) * 0x100000001b3ull;
  static const char* digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string out;
  for (int i = 0; i < 9; ++i, h /= 62) out += digits[h % 62];
  return out;
}

ChatTemplateCaps probe_chat_template(const ChatTemplate& tpl, const std::string& bos, const std::string& eos) {
  ChatTemplateCaps caps;
  auto render = [&](const J& messages, bool tools) -> Result<std::string> {
    J ctx = {{"messages", messages}, {"add_generation_prompt", true}, {"bos_token", bos}, {"eos_token", eos}};
    if (tools) ctx["tools"] = probe_tools();
    return tpl.render(ctx);
  };
  if (auto r = render(J::array({{{"role", "user"}, {"content", "kt_probe_question"}}}), true); r.ok())
    caps.renders_tools = r->find(kProbeTool) != std::string::npos;
  // The forms in the order the reference renderings try them (OpenAI's
  // first): the first that renders the call, its arguments as JSON (not
  // re-encoded as a string), and no "None", is the template's.
  for (const std::string& id : std::vector<std::string>{"call_kt_probe_1", "ktprobe01"}) {
    for (const auto& [object_args, null_content] : {std::pair{false, true}, {true, true}, {false, false}, {true, false}}) {
      auto r = render(probe_conversation(object_args, null_content, id), false);
      if (!r.ok()) continue;
      const std::string& text = *r;
      if (text.find(kProbeFn) == std::string::npos || text.find(kProbeArgs) == std::string::npos ||
          text.find("kt_probe_result") == std::string::npos)
        continue;
      if (null_content && text.find("None") != std::string::npos) continue;
      caps.renders_tool_calls = true;
      caps.object_arguments = object_args;
      caps.empty_for_null = !null_content;
      caps.nine_char_ids = id.size() == 9;
      return caps;
    }
  }
  // No form writes the calls: send objects and "" (what most templates take).
  caps.object_arguments = true;
  caps.empty_for_null = true;
  return caps;
}

Result<std::vector<ToolSpec>> parse_tool_specs(const J& tools) {
  std::vector<ToolSpec> out;
  if (tools.is_null()) return out;
  if (!tools.is_array()) return err("'tools' must be a list of {\"type\": \"function\", \"function\": {...}}");
  if (tools.size() > 256) return err("'tools' holds more than 256 tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string where = "tools[" + std::to_string(i) + "]";
    const J& t = tools[i];
    if (!t.is_object()) return err("'", where, "' must be an object");
    if (auto type = t.find("type"); type != t.end() && *type != J("function"))
      return err("'", where, ".type' must be \"function\"");
    const auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) return err("'", where, ".function' must be an object");
    ToolSpec s;
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) return err("'", where, ".function.name' must be a string");
    s.name = name->get<std::string>();
    if (s.name.empty() || s.name.size() > 64)
      return err("'", where, ".function.name' must be 1 to 64 characters");
    for (char c : s.name)
      if (!valid_name_char(c))
        return err("'", where, ".function.name' may hold only letters, digits, '_', '-' and '.': '", printable(s.name, 64), "'");
    for (const ToolSpec& o : out)
      if (o.name == s.name) return err("'", where, ".function.name': two tools are called '", s.name, "'");
    if (auto d = fn->find("description"); d != fn->end()) {
      if (!d->is_string() && !d->is_null()) return err("'", where, ".function.description' must be a string");
      if (d->is_string()) s.description = d->get<std::string>();
    }
    if (auto p = fn->find("parameters"); p != fn->end()) {
      if (!p->is_object() && !p->is_null()) return err("'", where, ".function.parameters' must be a JSON schema object");
      s.parameters = *p;
    }
    out.push_back(std::move(s));
  }
  return out;
}

J chat_template_context(const ChatTemplateCaps& caps, const ToolCallFormat& format, J messages, const J& tools,
                        const std::vector<ToolSpec>& specs, bool add_generation_prompt, const std::string& bos,
                        const std::string& eos, const J& extra) {
  for (J& m : messages) {
    if (!m.is_object()) continue;
    if (auto c = m.find("content"); c != m.end() && c->is_null() && caps.empty_for_null) *c = "";
    if (auto calls = m.find("tool_calls"); calls != m.end() && calls->is_array()) {
      for (J& call : *calls) {
        if (!call.is_object()) continue;
        if (caps.nine_char_ids)
          if (auto id = call.find("id"); id != call.end() && id->is_string()) *id = nine_char_id(id->get<std::string>());
        auto fn = call.find("function");
        if (fn == call.end() || !fn->is_object()) continue;
        auto args = fn->find("arguments");
        if (caps.object_arguments && args != fn->end() && args->is_string()) {
          J parsed = J::parse(args->get_ref<const std::string&>(), nullptr, false);
          if (!parsed.is_discarded() && parsed.is_object()) *args = std::move(parsed);
        }
      }
    }
    if (caps.nine_char_ids)
      if (auto id = m.find("tool_call_id"); id != m.end() && id->is_string()) *id = nine_char_id(id->get<std::string>());
  }
  if (!specs.empty() && !caps.renders_tools) {
    const std::string section = format.tools_prompt(specs);
    if (!messages.empty() && messages[0].is_object() && messages[0].value("role", "") == "system" &&
        messages[0]["content"].is_string()) {
      messages[0]["content"] = messages[0]["content"].get<std::string>() + "\n\n" + section;
    } else {
      messages.insert(messages.begin(), J{{"role", "system"}, {"content", section}});
    }
  }
  J ctx = {{"messages", std::move(messages)},
           {"add_generation_prompt", add_generation_prompt},
           {"bos_token", bos},
           {"eos_token", eos}};
  if (!specs.empty()) ctx["tools"] = tools;
  for (auto it = extra.begin(); it != extra.end(); ++it) ctx[it.key()] = it.value();
  return ctx;
}

}  // namespace kt
