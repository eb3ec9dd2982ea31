#include "tools/kt-serve/json_text.h"

namespace kt::serve {

namespace {

struct TooDeep {};

}  // namespace

Result<nlohmann::json> parse_json_object(std::string_view body) {
  if (body.empty()) return err("the request body is empty: a JSON object was expected");
  try {
    // The callback sees every value with its depth; refusing there stops the
    // parse before a deep structure is built.
    nlohmann::json::parser_callback_t depth_limit = [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
      if (depth > kMaxJsonDepth) throw TooDeep{};
      return true;
    };
    nlohmann::json j = nlohmann::json::parse(body, depth_limit);
    if (!j.is_object()) return err("the request body must be a JSON object, not ", j.type_name());
    return j;
  } catch (const TooDeep&) {
    return err("the request body nests deeper than ", kMaxJsonDepth, " levels");
  } catch (const nlohmann::json::exception& e) {
    return err("the request body is not valid JSON: ", printable(e.what(), 200));
  }
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace kt::serve
