// Public face of the chat-template interpreter (see chat_template.h).
#include "runtime/chat_template.h"

#include <nlohmann/json.hpp>

#include "runtime/jinja_ast.h"
#include "runtime/jinja_eval.h"

namespace kt {

Result<ChatTemplate> ChatTemplate::parse(std::string_view source, std::string name) {
  auto tpl = jinja::parse_template(jinja::normalize_source(source), std::move(name));
  if (!tpl) return tpl.error();
  return ChatTemplate(std::shared_ptr<const jinja::Template>(std::move(*tpl)));
}

const std::string& ChatTemplate::name() const { return tpl_->map.name; }

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context,
                                         const ChatTemplateOptions& options) const {
  if (!context.is_object()) return err(name(), ": render context must be a JSON object");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  for (const auto& [key, value] : context.items()) {
    auto v = jinja::from_json(value);
    if (!v) return err(name(), ": context variable '", key, "': ", v.error().message);
    vars.emplace_back(key, std::move(*v));
  }
  jinja::RenderConfig cfg;
  cfg.max_steps = options.max_steps;
  cfg.max_call_depth = options.max_call_depth;
  cfg.max_nesting = options.max_nesting;
  cfg.max_output_bytes = options.max_output_bytes;
  cfg.lenient = options.lenient;
  if (options.now) {
    cfg.now = *options.now;
  } else {
    std::time_t t = std::time(nullptr);
    localtime_r(&t, &cfg.now);
  }
  // Fill in weekday and day of year (%a, %j) from the calendar date.
  std::tm norm = cfg.now;
  norm.tm_isdst = 0;
  std::time_t secs = timegm(&norm);
  gmtime_r(&secs, &cfg.now);

  jinja::Interp interp(*tpl_, cfg);
  return interp.render(std::move(vars));
}

}  // namespace kt
