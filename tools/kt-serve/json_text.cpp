#include "tools/kt-serve/json_text.h"

#include <vector>

namespace kt::serve {

namespace {

struct TooDeep {};
struct TooWide {};

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

Result<nlohmann::ordered_json> parse_ordered_json_object(std::string_view body) {
  if (body.empty()) return err("the request body is empty: a JSON object was expected");
  try {
    std::vector<size_t> keys;  // per open object
    nlohmann::ordered_json::parser_callback_t limits = [&keys](int depth, nlohmann::ordered_json::parse_event_t ev,
                                                               nlohmann::ordered_json&) {
      using E = nlohmann::ordered_json::parse_event_t;
      if (depth > kMaxJsonDepth) throw TooDeep{};
      if (ev == E::object_start) keys.push_back(0);
      if (ev == E::object_end && !keys.empty()) keys.pop_back();
      if (ev == E::key && !keys.empty() && ++keys.back() > kMaxJsonKeys) throw TooWide{};
      return true;
    };
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(body, limits);
    if (!j.is_object()) return err("the request body must be a JSON object, not ", j.type_name());
    return j;
  } catch (const TooDeep&) {
    return err("the request body nests deeper than ", kMaxJsonDepth, " levels");
  } catch (const TooWide&) {
    return err("the request body has an object with more than ", kMaxJsonKeys, " keys");
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
